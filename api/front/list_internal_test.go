package front

import (
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/utcpd/utcpd/utcp"
)

func TestCursorRoundTrip(t *testing.T) {
	for _, name := range []string{"a.b", "gh.repos/get", "x.\u00e9t\u00e9", "m.a:b"} {
		lq := listQuery{}
		if err := lq.readCursor(encodeListCursor(name)); err != nil || lq.after != name {
			t.Errorf("list cursor of %q: after %q, %v", name, lq.after, err)
		}
	}
	c := encodeSearchCursor(40, "sum of numbers", []string{"Math", "stream", "math"})
	lq := listQuery{q: "sum of numbers", tags: []string{"stream", "MATH"}}
	if err := lq.readCursor(c); err != nil || lq.offset != 40 {
		t.Errorf("search cursor: offset %d, %v (the tag set is the same)", lq.offset, err)
	}
}

func TestParseListQueryRefuses(t *testing.T) {
	search := encodeSearchCursor(5, "q", nil)
	for _, raw := range []string{
		"limit=0", "limit=x", "limit=-3",
		"cursor=!!", "cursor=bg", // "n" alone: too short
		"cursor=" + url.QueryEscape(encodeListCursor("a.b")) + "&q=x",
		"cursor=" + url.QueryEscape(search),
		"cursor=" + url.QueryEscape(search) + "&q=other",
		"cursor=" + url.QueryEscape(encodeSearchCursor(-1, "q", nil)) + "&q=q",
		"cursor=eHl6", // kind x
	} {
		_, err := parseListQuery(httptest.NewRequest("GET", "/v1/tools?"+raw, nil))
		if utcp.CodeOf(err) != utcp.CodeInvalidRequest {
			t.Errorf("%s: %v, want invalid_request", raw, err)
		}
	}
	lq, err := parseListQuery(httptest.NewRequest("GET", "/v1/tools?limit=5000&tags=a,,b&tags=c", nil))
	if err != nil || lq.limit != MaxLimit || len(lq.tags) != 3 {
		t.Errorf("%+v %v", lq, err)
	}
}
