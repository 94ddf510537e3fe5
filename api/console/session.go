package console

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/utcpd/utcpd/api/httpx"
	"github.com/utcpd/utcpd/utcp"
)

// Cookie names. The session cookie carries a random 256-bit id; the
// login cookie the login form's CSRF token.
const (
	sessionCookie = "utcpd_console"
	loginCookie   = "utcpd_console_login"
)

// loginTokenTTL is how long a login form stays usable.
const loginTokenTTL = 15 * time.Minute

// maxFlash caps the messages kept for a session's next page.
const maxFlash = 8

// maxTokenBytes caps the admin token a login form may carry.
const maxTokenBytes = 4096

// session is one logged-in browser.
type session struct {
	key      [sha256.Size]byte // SHA-256 of the cookie's id
	csrf     string
	created  time.Time
	lastSeen time.Time
	flash    []string
}

// sessions keeps the sessions in memory, keyed by the SHA-256 of their
// id (so a lookup's timing tells nothing about an id), bounded in number.
type sessions struct {
	mu   sync.Mutex
	m    map[[sha256.Size]byte]*session
	max  int
	ttl  time.Duration
	idle time.Duration
	now  func() time.Time
}

func newSessions(max int, ttl, idle time.Duration) *sessions {
	return &sessions{m: map[[sha256.Size]byte]*session{}, max: max, ttl: ttl, idle: idle, now: time.Now}
}

// randomToken returns 32 random bytes, base64url-encoded.
func randomToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// create starts a session and returns it with its cookie value. When the
// store is full the expired sessions go first, then the least recently
// used one.
func (s *sessions) create() (*session, string) {
	id := randomToken()
	now := s.now()
	ss := &session{key: sha256.Sum256([]byte(id)), csrf: randomToken(), created: now, lastSeen: now}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.m) >= s.max {
		for k, v := range s.m {
			if s.expired(v, now) {
				delete(s.m, k)
			}
		}
	}
	for len(s.m) >= s.max {
		var oldest *session
		for _, v := range s.m {
			if oldest == nil || v.lastSeen.Before(oldest.lastSeen) {
				oldest = v
			}
		}
		delete(s.m, oldest.key)
	}
	s.m[ss.key] = ss
	return ss, id
}

func (s *sessions) expired(v *session, now time.Time) bool {
	return now.Sub(v.created) >= s.ttl || now.Sub(v.lastSeen) >= s.idle
}

// get returns the live session of cookie value id, and marks it used.
func (s *sessions) get(id string) *session {
	if id == "" || len(id) > 128 {
		return nil
	}
	key := sha256.Sum256([]byte(id))
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.m[key]
	if v == nil {
		return nil
	}
	if s.expired(v, now) {
		delete(s.m, key)
		return nil
	}
	v.lastSeen = now
	return v
}

// alive reports whether v is still a live session (not logged out,
// evicted or expired), without marking it used.
func (s *sessions) alive(v *session) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[v.key] == v && !s.expired(v, s.now())
}

func (s *sessions) remove(v *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m[v.key] == v {
		delete(s.m, v.key)
	}
}

func (s *sessions) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

func (s *sessions) addFlash(v *session, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(v.flash) < maxFlash {
		v.flash = append(v.flash, msg)
	}
}

func (s *sessions) takeFlash(v *session) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := v.flash
	v.flash = nil
	return f
}

type sessionKey struct{}

func sessionFrom(ctx context.Context) *session {
	s, _ := ctx.Value(sessionKey{}).(*session)
	return s
}

// equalSecret compares two secrets in constant time (as SHA-256 digests,
// so neither length nor content shows in the timing).
func equalSecret(a, b string) bool {
	da, db := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(da[:], db[:]) == 1
}

// cookie returns a console cookie with the security attributes every one
// has: HttpOnly, SameSite=Strict, Path=/ui/, Secure over TLS.
func (c *Console) cookie(r *http.Request, name, value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: name, Value: value, Path: Path, MaxAge: maxAge, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: c.secure || r.TLS != nil}
}

// authed wraps a handler of a page that needs a session: without one a
// page GET goes to the login page (and back afterwards), anything else is
// 401. Every POST must also pass sameSite and carry the session's CSRF
// token.
func (c *Console) authed(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var s *session
		if ck, err := r.Cookie(sessionCookie); err == nil {
			s = c.sessions.get(ck.Value)
		}
		if s == nil {
			if r.Method == http.MethodGet && !wantsJSON(r) && r.URL.Path != Path+"traffic/events" {
				seeOther(w, r, Path+"login?next="+url.QueryEscape(r.URL.RequestURI()))
				return
			}
			c.renderError(w, r, nil, httpx.Errorf(utcp.CodeUnauthorized, "log in to the console first (%slogin)", Path).
				WithDetail("reason", "no_session"))
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), sessionKey{}, s))
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if err := sameSite(r); err != nil {
				c.renderError(w, r, s, err)
				return
			}
			if err := c.checkCSRF(w, r, s.csrf, "csrf"); err != nil {
				c.renderError(w, r, s, err)
				return
			}
		}
		next(w, r)
	}
}

// checkCSRF reads the request's CSRF token (the X-CSRF-Token header, or
// the form field of the given name) and compares it with want. A form
// body is read here, bounded by MaxBodyBytes.
func (c *Console) checkCSRF(w http.ResponseWriter, r *http.Request, want, field string) error {
	if isForm(r) && r.PostForm == nil {
		r.Body = http.MaxBytesReader(w, r.Body, c.opts.MaxBodyBytes)
		if err := r.ParseForm(); err != nil {
			return httpx.Errorf(utcp.CodeInvalidRequest, "the form could not be read: %w", err)
		}
	}
	got := r.Header.Get("X-CSRF-Token")
	if got == "" && r.PostForm != nil {
		got = r.PostForm.Get(field)
	}
	if got == "" || want == "" || !equalSecret(got, want) {
		return httpx.Errorf(utcp.CodeForbidden, "the request carries no valid CSRF token: reload the page and try again").
			WithDetail("reason", "csrf")
	}
	return nil
}

func isForm(r *http.Request) bool {
	return strings.HasPrefix(strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Type"))), "application/x-www-form-urlencoded")
}

// sameSite refuses a state-changing request that a browser says another
// origin made: an Origin that is not the request's own host:port (even
// one gateway.allowed_origins admits), or a Sec-Fetch-Site other than
// same-origin. Clients that send neither (tests, curl) are judged by the
// CSRF token alone.
func sameSite(r *http.Request) error {
	refuse := func(why string) error {
		return httpx.Errorf(utcp.CodeForbidden, "the console takes changes only from its own pages (%s)", why).
			WithDetail("reason", "cross_site")
	}
	if sfs := r.Header.Get("Sec-Fetch-Site"); sfs != "" && sfs != "same-origin" {
		return refuse("Sec-Fetch-Site: " + sfs)
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || !sameHostPort(u, r.Host) {
			return refuse("Origin: " + o)
		}
	}
	return nil
}

// sameHostPort reports whether origin u names host (a Host header), the
// scheme's default port filled in on either side.
func sameHostPort(u *url.URL, host string) bool {
	def := "80"
	if u.Scheme == "https" {
		def = "443"
	}
	oh, op := u.Hostname(), u.Port()
	if op == "" {
		op = def
	}
	hh, hp, err := net.SplitHostPort(host)
	if err != nil {
		hh, hp = strings.Trim(host, "[]"), def
	}
	return strings.EqualFold(oh, hh) && op == hp
}

// ---- login and logout ----

type loginData struct {
	Next       string
	LoginToken string
	NoToken    bool
}

// localNext returns next when it is a console path (no open redirect),
// else the Manuals page.
func localNext(next string) string {
	if strings.HasPrefix(next, Path) && !strings.ContainsAny(next, "\\\r\n") && !strings.HasPrefix(next, Path+"login") &&
		!strings.Contains(next, "//") && !strings.Contains(next, "/./") && !strings.Contains(next, "/../") {
		if u, err := url.Parse(next); err == nil && u.Scheme == "" && u.Host == "" {
			return next
		}
	}
	return Path + "manuals"
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	c.showLogin(w, r, http.StatusOK, nil)
}

func (c *Console) showLogin(w http.ResponseWriter, r *http.Request, status int, err error) {
	tok := randomToken()
	http.SetCookie(w, c.cookie(r, loginCookie, tok, int(loginTokenTTL/time.Second)))
	p := page{Title: "Log in", Data: loginData{Next: localNext(r.FormValue("next")), LoginToken: tok, NoToken: c.opts.AdminToken == ""}}
	if err != nil {
		p.Problem = problemOf(err)
	}
	c.render(w, r, status, "login", p)
}

func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if err := sameSite(r); err != nil {
		c.renderError(w, r, nil, err)
		return
	}
	want := ""
	if ck, err := r.Cookie(loginCookie); err == nil {
		want = ck.Value
	}
	if err := c.checkCSRF(w, r, want, "login_csrf"); err != nil {
		c.showLogin(w, r, http.StatusForbidden, err)
		return
	}
	if c.opts.AdminToken == "" {
		c.showLogin(w, r, http.StatusUnauthorized, httpx.Errorf(utcp.CodeUnauthorized,
			"the daemon has no admin token configured, so the console refuses every login"))
		return
	}
	tok := strings.TrimSpace(r.PostForm.Get("token"))
	if tok == "" || len(tok) > maxTokenBytes || !equalSecret(tok, c.opts.AdminToken) {
		c.showLogin(w, r, http.StatusUnauthorized, httpx.Errorf(utcp.CodeUnauthorized, "that is not the admin token"))
		return
	}
	// A new session id at every login (no fixation); the old one ends.
	if ck, err := r.Cookie(sessionCookie); err == nil {
		if old := c.sessions.get(ck.Value); old != nil {
			c.sessions.remove(old)
		}
	}
	_, id := c.sessions.create()
	http.SetCookie(w, c.cookie(r, sessionCookie, id, int(c.opts.SessionTTL/time.Second)))
	http.SetCookie(w, c.cookie(r, loginCookie, "", -1))
	seeOther(w, r, localNext(r.PostForm.Get("next")))
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	if s := sessionFrom(r.Context()); s != nil {
		c.sessions.remove(s)
	}
	http.SetCookie(w, c.cookie(r, sessionCookie, "", -1))
	seeOther(w, r, Path+"login")
}
