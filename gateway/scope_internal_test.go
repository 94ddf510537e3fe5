package gateway

import (
	"testing"
	"time"

	"github.com/utcpd/utcpd/internal/glob"
	"github.com/utcpd/utcpd/utcp"
)

func TestNamedKeyGlob(t *testing.T) {
	for _, c := range []struct {
		p, name string
		want    bool
	}{
		{"github.*", "github.repos/delete", true},
		{"github.*", "github", false},
		{"github.*", "githubx.a", false},
		{"*", "", true},
		{"*.add", "m.srv.add", true},
		{"demo.add", "demo.add", true},
		{"demo.add", "demo.adder", false},
		{"d?mo.*", "demo.x", true},
		{"d?mo.*", "dmo.x", false},
		{"a*b*c", "aXbYbZc", true},
		{"a*b*c", "aXbYbZ", false},
		{"é.*", "é.x", true},
		{"?", "é", true},
	} {
		if got := glob.Compile(c.p).Match(c.name); got != c.want {
			t.Errorf("%q ~ %q: %v, want %v", c.p, c.name, got, c.want)
		}
	}
}

func TestNamedKeyScopeRules(t *testing.T) {
	tool := func(name string, tags ...string) *utcp.Tool { return &utcp.Tool{Name: name, Tags: tags} }
	mk := func(tools, manuals, tags []string) *Scope {
		s, err := NewScope(tools, manuals, tags)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	var none *Scope
	if !none.All() || !none.Allows(tool("x.y")) || !mk(nil, nil, nil).All() || !none.AllowsServer("m", "s") {
		t.Error("an empty scope allows everything")
	}
	// Any include and no exclude, whatever the order.
	for _, s := range []*Scope{mk([]string{"!github.repos/delete", "github.*"}, nil, nil), mk([]string{"github.*", "!github.repos/delete"}, nil, nil)} {
		if !s.Allows(tool("github.repos/list")) || s.Allows(tool("github.repos/delete")) || s.Allows(tool("demo.add")) {
			t.Errorf("%v", s)
		}
	}
	// Exclusions alone allow the rest.
	if s := mk([]string{"!demo.echo"}, nil, nil); !s.Allows(tool("demo.add")) || s.Allows(tool("demo.echo")) {
		t.Errorf("%v", s)
	}
	// Manuals and tags narrow further.
	s := mk([]string{"*.add"}, []string{"demo"}, []string{"Math"})
	if !s.Allows(tool("demo.add", "MATH")) || s.Allows(tool("demo.add")) || s.Allows(tool("other.add", "math")) || s.Allows(nil) {
		t.Errorf("%v", s)
	}
	// Resources and prompts by their server's namespace.
	if s := mk([]string{"everything.*"}, nil, nil); !s.AllowsServer("everything", "srv") || s.AllowsServer("other", "srv") {
		t.Errorf("%v", s)
	}
	if s := mk([]string{"everything.srv.echo"}, nil, nil); s.AllowsServer("everything", "srv") {
		t.Errorf("a single tool does not give its server's prompts: %v", s)
	}
	if s := mk(nil, nil, []string{"math"}); s.AllowsServer("everything", "srv") {
		t.Errorf("a tag scope gives no untagged item: %v", s)
	}
	if s := mk(nil, []string{"everything"}, nil); !s.AllowsServer("everything", "srv") || s.AllowsServer("x", "srv") {
		t.Errorf("%v", s)
	}
}

func TestNamedKeyScopeNarrow(t *testing.T) {
	tool := func(name string, tags ...string) *utcp.Tool { return &utcp.Tool{Name: name, Tags: tags} }
	mk := func(tools, manuals, tags []string) *Scope {
		s, err := NewScope(tools, manuals, tags)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	key, set := mk([]string{"github.*", "demo.add"}, nil, nil), mk([]string{"*.repos/*", "demo.*"}, nil, nil)
	n := key.Narrow(set)
	for name, want := range map[string]bool{"github.repos/list": true, "github.issues/list": false, "demo.add": true, "demo.echo": false, "other.repos/x": false} {
		if got := n.Allows(tool(name)); got != want {
			t.Errorf("narrowed %s: %v, want %v", name, got, want)
		}
	}
	if n.All() || !n.MayAllowManual("github") || n.MayAllowManual("other") || n.AllowsServer("github", "srv") {
		t.Errorf("narrowed %v", n)
	}
	var none *Scope
	if none.Narrow(key) != key || key.Narrow(nil) != key || !none.Narrow(nil).All() {
		t.Error("narrowing by everything")
	}
	if s := n.String(); s != "(tools github.*, demo.add); (tools *.repos/*, demo.*)" {
		t.Errorf("String %q", s)
	}
}

func TestNamedKeyRateLimit(t *testing.T) {
	for in, want := range map[string]RateLimit{"5/s": {5, time.Second}, " 100 / m ": {100, time.Minute}, "1/hour": {1, time.Hour}, "20/10s": {20, 10 * time.Second}} {
		if got, err := ParseRateLimit(in); err != nil || got != want {
			t.Errorf("%q: %v %v", in, got, err)
		}
	}
	for _, in := range []string{"", "5", "x/s", "-1/s", "0/s", "5/0s", "5/fortnight", "5/-1s"} {
		if _, err := ParseRateLimit(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
	if s := (RateLimit{5, time.Second}).String(); s != "5/s" {
		t.Errorf("%s", s)
	}
}

func TestNamedKeyNames(t *testing.T) {
	for _, n := range []string{"ci-bot", "math", "a", "A.b_c-1"} {
		if !ValidKeyName(n) {
			t.Errorf("%q refused", n)
		}
	}
	for _, n := range []string{"", "-a", ".a", "a b", "key:1", "cli", "stdio", "utcpd-admin", "Utcpd", string(make([]byte, 65))} {
		if ValidKeyName(n) {
			t.Errorf("%q accepted", n)
		}
	}
}
