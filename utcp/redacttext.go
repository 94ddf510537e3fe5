package utcp

import (
	"net/url"
	"strings"
)

// This file redacts secrets by their value: credentials inside URLs and
// connection strings, and tokens whose shape gives them away wherever
// they appear in a string. It is a hand-written single pass over the
// bytes (no regular expressions): every position is tested against a
// table of the bytes a finding can start with, a candidate is confirmed
// by comparing a short literal prefix, and a scan that fails skips the
// run of bytes it read, so a string costs O(len) whatever it holds and a
// string with nothing to redact is returned as is, without allocating.

// RedactText returns s with the secrets it can recognise by their value
// replaced by Redacted:
//
//   - the values of URL query parameters whose name looks secret
//     (api_key, key, token, access_token, sig, signature, auth, password,
//     client_secret, …), and of key=value pairs such as a key=value DSN's
//     password=… or a command line's --token=…;
//   - the password of URL user info (postgres://user:pass@host/db) and of
//     a user:pass@tcp(…) DSN;
//   - the value of a "secret_name": "value" pair in JSON text;
//   - well-known token shapes: OpenAI and Anthropic keys (sk-…, sk-proj-…,
//     sk-ant-…), GitHub tokens (ghp_, gho_, ghu_, ghs_, ghr_, github_pat_),
//     Slack tokens (xoxa-, xoxb-, xoxp-, xoxr-, xoxs-), AWS access key ids
//     (AKIA…, ASIA…), Google API keys (AIza…), Stripe keys (sk_live_,
//     rk_live_, sk_test_, rk_test_), JWTs (eyJ….….…), the credentials
//     after "Bearer " and "Basic ", and PEM private key blocks.
//
// A token's recognisable prefix (sk-, ghp_, Bearer …) is kept, so the
// reader still sees what was there. A value that is only a variable
// reference (${API_KEY}, $API_KEY) or a {placeholder} is kept: it names a
// secret rather than holding one. Ordinary words do not match: a token
// body must be long enough and look random (hold a digit, or both upper-
// and lower-case letters).
func RedactText(s string) string {
	start, end := findSecret(s, 0)
	if start < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + len(Redacted))
	last := 0
	for start >= 0 {
		b.WriteString(s[last:start])
		b.WriteString(Redacted)
		last = end
		start, end = findSecret(s, end)
	}
	b.WriteString(s[last:])
	return b.String()
}

// HasSecretText reports whether RedactText would change s. It does not
// allocate.
func HasSecretText(s string) bool {
	start, _ := findSecret(s, 0)
	return start >= 0
}

// RedactURL renders u for messages and logs: without user info, with a
// query replaced by "…" (it may hold an api_key, or argument values), and
// without its fragment; a token shape left in the path or host (a bot
// token in the path, say) is redacted as RedactText does.
func RedactURL(u *url.URL) string {
	if u == nil {
		return ""
	}
	c := *u
	c.User = nil
	if c.RawQuery != "" {
		c.RawQuery = "…"
	}
	c.ForceQuery = false
	c.Fragment = ""
	c.RawFragment = ""
	return RedactText(c.String())
}

// RedactURLString is RedactURL for a URL held as a string; a string that
// does not parse as a URL is shown as "(invalid URL)".
func RedactURLString(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(invalid URL)"
	}
	return RedactURL(u)
}

// startByte marks the bytes a finding can start at (or, for '=', ':' and
// '@', be anchored at).
var startByte = [256]bool{
	'=': true, '@': true, ':': true, '-': true,
	's': true, 'r': true, 'g': true, 'x': true, 'e': true,
	'A': true, 'B': true, 'b': true,
}

// findSecret returns the byte span [start, end) of the first secret in s
// at or after from, or -1, -1.
func findSecret(s string, from int) (int, int) {
	for i := from; i < len(s); i++ {
		c := s[i]
		if !startByte[c] {
			continue
		}
		var st, en, skip int
		switch c {
		case '=':
			st, en = keyValue(s, i)
		case ':':
			st, en = jsonPair(s, i)
		case '@':
			st, en = userinfo(s, i)
		case '-':
			st, en = pemBlock(s, i)
		case 's':
			if i > 0 && isAlnum(s[i-1]) {
				continue
			}
			if strings.HasPrefix(s[i:], "sk-") {
				st, en, skip = tokenBody(s, i+3, isBodyDash, 20, true)
			} else if strings.HasPrefix(s[i:], "sk_live_") || strings.HasPrefix(s[i:], "sk_test_") {
				st, en, skip = tokenBody(s, i+8, isAlnum, 16, false)
			}
		case 'r':
			if i > 0 && isAlnum(s[i-1]) {
				continue
			}
			if strings.HasPrefix(s[i:], "rk_live_") || strings.HasPrefix(s[i:], "rk_test_") {
				st, en, skip = tokenBody(s, i+8, isAlnum, 16, false)
			}
		case 'g':
			if i > 0 && isAlnum(s[i-1]) {
				continue
			}
			if len(s) > i+4 && s[i+1] == 'h' && s[i+3] == '_' && strings.IndexByte("pousr", s[i+2]) >= 0 {
				st, en, skip = tokenBody(s, i+4, isAlnum, 30, false)
			} else if strings.HasPrefix(s[i:], "github_pat_") {
				st, en, skip = tokenBody(s, i+11, isWord, 20, true)
			}
		case 'x':
			if i > 0 && isAlnum(s[i-1]) {
				continue
			}
			if len(s) > i+5 && s[i+1] == 'o' && s[i+2] == 'x' && s[i+4] == '-' && strings.IndexByte("abprs", s[i+3]) >= 0 {
				st, en, skip = tokenBody(s, i+5, isAlnumDash, 10, true)
			}
		case 'A':
			if i > 0 && isAlnum(s[i-1]) {
				continue
			}
			if strings.HasPrefix(s[i:], "AKIA") || strings.HasPrefix(s[i:], "ASIA") {
				st, en = awsKeyID(s, i+4)
			} else if strings.HasPrefix(s[i:], "AIza") {
				st, en, skip = tokenBody(s, i+4, isBodyDash, 30, false)
			}
		case 'e':
			if i > 0 && isBodyDash(s[i-1]) {
				continue
			}
			if strings.HasPrefix(s[i:], "eyJ") {
				st, en, skip = jwt(s, i)
			}
		case 'B', 'b':
			if i > 0 && isAlnum(s[i-1]) {
				continue
			}
			st, en = authScheme(s, i)
		}
		if st >= from && en > st {
			return st, en
		}
		if skip > i+1 {
			i = skip - 1 // every later start inside the run fails the same way
		}
	}
	return -1, -1
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func isWord(c byte) bool       { return isAlnum(c) || c == '_' }
func isAlnumDash(c byte) bool  { return isAlnum(c) || c == '-' }
func isBodyDash(c byte) bool   { return isAlnum(c) || c == '_' || c == '-' }
func isUpperDigit(c byte) bool { return c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// looksRandom reports whether a token body could be a generated secret
// rather than a word: it holds a digit, or both upper- and lower-case
// letters. A part of a body that fails it fails it too, which lets a
// failed scan skip the whole run.
func looksRandom(b string) bool {
	var upper, lower bool
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case c >= '0' && c <= '9':
			return true
		case c >= 'A' && c <= 'Z':
			upper = true
		case c >= 'a' && c <= 'z':
			lower = true
		}
	}
	return upper && lower
}

// tokenBody reads the run of body bytes from at. It is a secret when it
// is at least min bytes long (and, with random, looks random). skip is
// where the run ends, for the caller to resume after a failure.
func tokenBody(s string, at int, body func(byte) bool, min int, random bool) (int, int, int) {
	j := at
	for j < len(s) && body(s[j]) {
		j++
	}
	if j-at >= min && (!random || looksRandom(s[at:j])) {
		return at, j, j
	}
	return -1, -1, j
}

// awsKeyID matches the 16 upper-case letters and digits of an AWS access
// key id after its AKIA/ASIA prefix, not followed by more of them.
func awsKeyID(s string, at int) (int, int) {
	end := at + 16
	if end > len(s) || end < len(s) && isAlnum(s[end]) {
		return -1, -1
	}
	for j := at; j < end; j++ {
		if !isUpperDigit(s[j]) {
			return -1, -1
		}
	}
	return at, end
}

// jwt matches header.payload.signature, three base64url segments the
// first of which starts with eyJ (`{"`); the signature may be empty (an
// unsigned token).
func jwt(s string, i int) (int, int, int) {
	j := i
	for j < len(s) && isBodyDash(s[j]) {
		j++
	}
	seg1 := j
	if seg1-i < 10 || j >= len(s) || s[j] != '.' {
		return -1, -1, seg1
	}
	j++
	k := j
	for k < len(s) && isBodyDash(s[k]) {
		k++
	}
	if k-j < 2 || k >= len(s) || s[k] != '.' {
		return -1, -1, seg1
	}
	k++
	for k < len(s) && isBodyDash(s[k]) {
		k++
	}
	return i, k, k
}

// authScheme matches "Bearer <token>" and "Basic <credentials>" (any
// case) and returns the span of the credentials.
func authScheme(s string, i int) (int, int) {
	var n int
	switch {
	case hasPrefixFold(s[i:], "bearer"):
		n = 6
	case hasPrefixFold(s[i:], "basic"):
		n = 5
	default:
		return -1, -1
	}
	j := i + n
	if j >= len(s) || s[j] != ' ' {
		return -1, -1
	}
	for j < len(s) && s[j] == ' ' {
		j++
	}
	at := j
	upperInside, lower, digit := false, false, false
	for j < len(s) && isTokenChar(s[j]) {
		c := s[j]
		switch {
		case c >= '0' && c <= '9':
			digit = true
		case c >= 'A' && c <= 'Z':
			upperInside = upperInside || j > at
		case c >= 'a' && c <= 'z':
			lower = true
		}
		j++
	}
	// "Bearer authentication" and "Bearer Authentication" are words; a
	// credential has a digit or an upper-case letter after its first byte.
	if j-at < 8 || !(digit || upperInside && lower) {
		return -1, -1
	}
	return at, j
}

// isTokenChar reports the bytes of an RFC 6750 b64token.
func isTokenChar(c byte) bool {
	return isAlnum(c) || strings.IndexByte("-._~+/=", c) >= 0
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// pemBlock matches a PEM private key block from "-----BEGIN … PRIVATE
// KEY-----" to the end of its END line (or of s), all of it.
func pemBlock(s string, i int) (int, int) {
	const begin = "-----BEGIN "
	if !strings.HasPrefix(s[i:], begin) {
		return -1, -1
	}
	head := s[i+len(begin):]
	if len(head) > 64 {
		head = head[:64]
	}
	h := strings.Index(head, "PRIVATE KEY-----")
	if h < 0 || strings.IndexByte(head[:h], '\n') >= 0 {
		return -1, -1
	}
	rest := i + len(begin) + h + len("PRIVATE KEY-----")
	e := strings.Index(s[rest:], "-----END ")
	if e < 0 {
		return i, len(s)
	}
	e += rest + len("-----END ")
	t := strings.Index(s[e:], "-----")
	if t < 0 {
		return i, len(s)
	}
	return i, e + t + len("-----")
}

// maxKeyLen bounds the parameter names keyValue and jsonPair look at.
const maxKeyLen = 64

func isKeyChar(c byte) bool { return isBodyDash(c) || c == '.' }

// keyValue handles the '=' at i: when the name before it looks secret,
// the value after it is the span.
func keyValue(s string, i int) (int, int) {
	k := i
	for k > 0 && i-k <= maxKeyLen && isKeyChar(s[k-1]) {
		k--
	}
	if k == i || i-k > maxKeyLen {
		return -1, -1
	}
	query := false
	if k > 0 {
		switch p := s[k-1]; p {
		case '?', '&':
			query = true
		case ' ', '\t', '\n', '\r', ';', ',', '"', '\'', '`', '(', '[', '{', '|':
		default:
			return -1, -1
		}
	}
	if !secretParam(s[k:i], query) {
		return -1, -1
	}
	v := i + 1
	if v < len(s) && !query && (s[v] == '\'' || s[v] == '"') {
		q := s[v]
		e := strings.IndexByte(s[v+1:], q)
		if e < 0 {
			return valueSpan(s, v+1, len(s))
		}
		return valueSpan(s, v+1, v+1+e)
	}
	e := v
	for e < len(s) {
		c := s[e]
		if isSpace(c) || c == '&' || c == '"' || c == '\'' || c == '`' || (query && (c == '#' || c == '<' || c == '>')) ||
			(!query && (c == ';' || c == ',')) {
			break
		}
		e++
	}
	return valueSpan(s, v, e)
}

// valueSpan returns [v, e) unless the value is empty, already redacted,
// or only names a variable or placeholder.
func valueSpan(s string, v, e int) (int, int) {
	val := s[v:e]
	if val == "" || val == Redacted || isReference(val) {
		return -1, -1
	}
	return v, e
}

// isReference reports a value that is one ${VAR}, {placeholder} or
// $VAR; a bare $VAR must be upper case (a password may start with $).
func isReference(v string) bool {
	valid := isWord
	switch {
	case strings.HasPrefix(v, "${") && strings.HasSuffix(v, "}"):
		v = v[2 : len(v)-1]
	case strings.HasPrefix(v, "{") && strings.HasSuffix(v, "}"):
		v = v[1 : len(v)-1]
	case strings.HasPrefix(v, "$"):
		v = v[1:]
		valid = func(c byte) bool { return c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' }
	default:
		return false
	}
	if v == "" {
		return false
	}
	for i := 0; i < len(v); i++ {
		if !valid(v[i]) {
			return false
		}
	}
	return true
}

// jsonPair handles the ':' at i of `"name": "value"` in JSON text.
func jsonPair(s string, i int) (int, int) {
	if i < 2 || s[i-1] != '"' {
		return -1, -1
	}
	k := i - 1
	for k > 0 && i-k <= maxKeyLen+1 && isKeyChar(s[k-1]) {
		k--
	}
	if k == 0 || s[k-1] != '"' || k == i-1 || !SecretName(s[k:i-1]) {
		return -1, -1
	}
	v := i + 1
	for v < len(s) && s[v] == ' ' {
		v++
	}
	if v >= len(s) || s[v] != '"' {
		return -1, -1
	}
	v++
	e := v
	for e < len(s) && s[e] != '"' {
		if s[e] == '\\' {
			e++
		}
		e++
	}
	return valueSpan(s, v, min(e, len(s)))
}

// userinfo handles the '@' at i: the password of scheme://user:pass@host,
// or of a user:pass@tcp(…) / @unix(…) DSN.
func userinfo(s string, i int) (int, int) {
	j := i
	for j > 0 && isUserinfoChar(s[j-1]) {
		j--
	}
	if j == i {
		return -1, -1
	}
	if !(j >= 3 && s[j-3:j] == "://") {
		dsn := strings.HasPrefix(s[i+1:], "tcp(") || strings.HasPrefix(s[i+1:], "unix(")
		if !dsn || j > 0 && !(isSpace(s[j-1]) || strings.IndexByte(`"'=`, s[j-1]) >= 0) {
			return -1, -1
		}
	}
	// An unescaped @ in the password: the user info ends at the last @
	// of the authority, as URL parsers read it.
	end := i
	for k := i + 1; k < len(s) && isUserinfoChar(s[k]) || k < len(s) && s[k] == '@'; k++ {
		if s[k] == '@' {
			end = k
		}
	}
	c := strings.IndexByte(s[j:end], ':')
	if c < 0 {
		return -1, -1
	}
	return valueSpan(s, j+c+1, end)
}

func isUserinfoChar(c byte) bool {
	return c > ' ' && c < 0x7f && strings.IndexByte(`/?#@"'<>\`+"`", c) < 0
}

// secretParam reports whether a parameter name (of a URL query when
// query, of key=value text otherwise) names a secret: it contains
// password, passwd, secret, token (not tokens), apikey, api_key,
// credential, signature, private_key, access_key or sessionid, or is pwd,
// pass or passphrase; in a query also key, sig, auth, jwt, code, session
// or sas, or a name ending in _key or _sig or starting with auth. Case is
// ignored and - and . read as _.
func secretParam(name string, query bool) bool {
	name = strings.TrimLeft(name, "-")
	var buf [maxKeyLen]byte
	if len(name) == 0 || len(name) > len(buf) {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		} else if c == '-' || c == '.' {
			c = '_'
		}
		buf[i] = c
	}
	n := buf[:len(name)]
	switch string(n) { // compared without a copy
	case "pwd", "pass", "passphrase":
		return true
	case "key", "sig", "auth", "jwt", "code", "session", "sas":
		return query
	}
	for i := 0; i < len(n); i++ {
		var found bool
		r := n[i:]
		switch n[i] {
		case 'p':
			found = hasPrefixB(r, "passw") || hasPrefixB(r, "private_key") || hasPrefixB(r, "privatekey")
		case 's':
			found = hasPrefixB(r, "secret") || hasPrefixB(r, "signature") || hasPrefixB(r, "sessionid") || hasPrefixB(r, "session_id")
		case 't':
			found = hasPrefixB(r, "token") && !hasPrefixB(r, "tokens") // max_tokens counts tokens
		case 'a':
			found = hasPrefixB(r, "apikey") || hasPrefixB(r, "api_key") || hasPrefixB(r, "access_key") || hasPrefixB(r, "accesskey")
		case 'c':
			found = hasPrefixB(r, "credential")
		}
		if found {
			return true
		}
	}
	if !query {
		return false
	}
	return hasSuffixB(n, "_key") || hasSuffixB(n, "_sig") || hasPrefixB(n, "auth")
}

func hasPrefixB(b []byte, p string) bool { return len(b) >= len(p) && string(b[:len(p)]) == p }
func hasSuffixB(b []byte, p string) bool { return len(b) >= len(p) && string(b[len(b)-len(p):]) == p }

// SecretName reports whether a field, header, environment variable or
// log attribute name looks like it holds a credential: it contains, in
// any case, api_key, api-key, apikey, token, secret, password, passwd,
// auth (authorization too), credential, cookie, session or private_key
// (private-key, privatekey). It does not allocate.
func SecretName(name string) bool {
	for i := 0; i+4 <= len(name); i++ { // the shortest needle, auth, has 4 bytes
		if !nameStart[name[i]] {
			continue
		}
		r := name[i:]
		var found bool
		switch name[i] | 0x20 { // ASCII lower case of a letter; no other byte maps onto one
		case 'a':
			switch lowerAt(r, 1) {
			case 'p':
				found = prefixLower(r, "api_key") || prefixLower(r, "api-key") || prefixLower(r, "apikey")
			case 'u':
				found = prefixLower(r, "auth")
			}
		case 't':
			found = lowerAt(r, 1) == 'o' && prefixLower(r, "token")
		case 's':
			found = lowerAt(r, 1) == 'e' && (prefixLower(r, "secret") || prefixLower(r, "session"))
		case 'p':
			switch lowerAt(r, 1) {
			case 'a':
				found = prefixLower(r, "password") || prefixLower(r, "passwd")
			case 'r':
				found = prefixLower(r, "private_key") || prefixLower(r, "private-key") || prefixLower(r, "privatekey")
			}
		case 'c':
			found = lowerAt(r, 1) == 'r' && prefixLower(r, "credential") || lowerAt(r, 1) == 'o' && prefixLower(r, "cookie")
		}
		if found {
			return true
		}
	}
	return false
}

// nameStart marks the bytes a SecretName needle starts with.
var nameStart = [256]bool{'a': true, 't': true, 's': true, 'p': true, 'c': true, 'A': true, 'T': true, 'S': true, 'P': true, 'C': true}

// lowerAt is s[i] in ASCII lower case, 0 past the end.
func lowerAt(s string, i int) byte {
	if i >= len(s) {
		return 0
	}
	c := s[i]
	if c >= 'A' && c <= 'Z' {
		c += 'a' - 'A'
	}
	return c
}

// prefixLower reports whether s starts with the lower-case ASCII w,
// ignoring case.
func prefixLower(s, w string) bool {
	if len(s) < len(w) {
		return false
	}
	for j := 0; j < len(w); j++ {
		c := s[j]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != w[j] {
			return false
		}
	}
	return true
}
