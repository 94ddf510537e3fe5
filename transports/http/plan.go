package http

import (
	"bytes"
	nethttp "net/http"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/utcpd/utcpd/transports/internal/httpclient"
	"github.com/utcpd/utcpd/utcp"
)

// plan is the part of a call's request that depends only on the template,
// computed once per parsed template (at registration, and again whenever
// the gateway re-parses a template after its variables changed), so a
// call only renders its arguments. A plan is read-only once built.
type plan struct {
	// header holds the static headers and the default User-Agent. Calls
	// that add no header of their own send it as it is (the HTTP client
	// never modifies a request's headers); others clone it.
	header nethttp.Header
	// segments is the URL split at its {name} placeholders; nil when it
	// has none.
	segments []segment
	// consumed lists the arguments that never become query parameters:
	// the header and cookie fields, the body field and the placeholders.
	consumed []string
	// For a URL without placeholders: the URL parsed once, or the error
	// parsing or checking it gave, and the strings a call's URL is made
	// of (prefix + "?" + query + suffix).
	staticErr      error
	staticURL      *url.URL
	staticString   string // the URL as it is, for a call with no query
	prefix, suffix string // around the query, for a call with one
}

// segment is a literal run of the URL followed by a placeholder (name ""
// for the trailing literal).
type segment struct {
	literal string
	name    string
	inQuery bool // the placeholder is after the '?': query-escaped
	// shadowed: the argument of that name is taken by header_fields,
	// cookie_fields or body_field first, so the placeholder is always
	// missing.
	shadowed bool
}

// newPlan prepares spec's requests. spec has its defaults applied.
func newPlan(spec *Template) *plan {
	p := &plan{header: nethttp.Header{}}
	for k, v := range spec.Headers {
		p.header.Set(k, v)
	}
	if p.header.Get("User-Agent") == "" {
		p.header.Set("User-Agent", "utcpd")
	}
	p.consumed = append(p.consumed, spec.HeaderFields...)
	p.consumed = append(p.consumed, spec.CookieFields...)
	p.consumed = append(p.consumed, spec.BodyField)
	raw := spec.URL
	queryAt := strings.IndexByte(raw, '?')
	last := 0
	for _, m := range placeholder.FindAllStringSubmatchIndex(raw, -1) {
		name := raw[m[2]:m[3]]
		p.segments = append(p.segments, segment{
			literal:  raw[last:m[0]],
			name:     name,
			inQuery:  queryAt >= 0 && m[0] > queryAt,
			shadowed: slices.Contains(spec.HeaderFields, name) || slices.Contains(spec.CookieFields, name) || name == spec.BodyField,
		})
		p.consumed = append(p.consumed, name)
		last = m[1]
	}
	if p.segments != nil {
		p.segments = append(p.segments, segment{literal: raw[last:]})
		return p
	}
	u, err := url.Parse(raw)
	if err != nil {
		p.staticErr = utcp.Errorf(utcp.CodeInvalidTemplate, "http: url: %w", err)
		return p
	}
	if err := httpclient.CheckURL(u, spec.AllowInsecure); err != nil {
		p.staticErr = err
		return p
	}
	p.staticURL = u
	p.staticString = u.String()
	bare := *u
	bare.RawQuery, bare.ForceQuery, bare.Fragment, bare.RawFragment = "", false, "", ""
	p.prefix = bare.String() + "?"
	if u.RawQuery != "" {
		p.prefix += u.RawQuery + "&"
	}
	if u.Fragment != "" {
		p.suffix = "#" + u.EscapedFragment()
	}
	return p
}

// planOf returns spec's plan, building one for a Template that did not
// come from ParseTemplate.
func planOf(spec *Template) *plan {
	if spec.plan != nil {
		return spec.plan
	}
	return newPlan(spec)
}

// consumes reports whether the argument name is not a query parameter.
func (p *plan) consumes(name string) bool {
	return slices.Contains(p.consumed, name)
}

// bodyPool recycles the buffers responses are read into on the call path.
var bodyPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledBody is the largest buffer returned to bodyPool.
const maxPooledBody = 64 << 10

func getBody() *bytes.Buffer { return bodyPool.Get().(*bytes.Buffer) }

func putBody(b *bytes.Buffer) {
	if b.Cap() > maxPooledBody {
		return
	}
	b.Reset()
	bodyPool.Put(b)
}
