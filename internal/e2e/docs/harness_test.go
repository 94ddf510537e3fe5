package docs

import (
	"strings"
	"testing"
)

// TestHarness runs small made-up docs through the same harness as
// TestDocs: what passes must pass, and each kind of rot must be caught
// with a message that names it.
func TestHarness(t *testing.T) {
	cases := []struct {
		name string
		md   string
		// want are texts one problem each must contain; none: the doc
		// passes.
		want []string
	}{
		{name: "a daemon in the background, on the moved default port, answers the next block",
			md: "```sh\nbin/utcpd serve --data-dir '' &\n```\n" +
				"<!-- docs-test: expect \"status\":\"ready\" -->\n" +
				"```sh\ncurl -s http://127.0.0.1:8787/readyz\nutcpd tools list\n```\n"},
		{name: "a foreground serve is started, waited for and stopped",
			md: "<!-- docs-test: expect utcpd listening on http://127.0.0.1:8787 -->\n" +
				"```sh\ngo run ./cmd/utcpd serve   # runs until stopped\n```\n"},
		{name: "a demo server from go run, and the examples' ports moved with it",
			md: "```sh\ngo run ./examples/servers/http -listen 127.0.0.1:8081 &\n```\n" +
				"<!-- docs-test: expect \"sum\": 5 -->\n" +
				"```sh\nutcpd call demo.add --config examples/manuals/quickstart.json --args '{\"a\": 2, \"b\": 3}'\n```\n"},
		{name: "shell state carries from block to block",
			md: "```sh\nX=from-the-first-block\ncd docs\n```\n" +
				"```sh\ntest \"$X\" = from-the-first-block\ntest -f mcp.md\n```\n"},
		{name: "console blocks: commands and their output",
			md: "```console\n$ echo hello \\\n  world\nhello world\n$ printf 'a\\nb\\n'\na\n```\n"},
		{name: "an exit directive for the last command",
			md: "<!-- docs-test: exit 2 -->\n```sh\ntrue\nbash -c 'exit 2'\n```\n"},
		{name: "a skipped block does not run",
			md: "<!-- docs-test: skip (would fail) -->\n```sh\nfalse\n```\n"},
		{name: "go test is checked, not run",
			md: "```sh\ngo test -run TestDocs ./internal/e2e/docs/\n```\n"},

		{name: "a failing command, named by its line",
			md:   "```sh\ntrue\nfalse\necho never\n```\n",
			want: []string{"x.md:1: failed with exit status 1 (the command at x.md:3)"}},
		{name: "a failing command in a later block stops the session",
			md:   "```sh\ntrue\n```\n```bash\nls /no/such/dir\n```\n```sh\ntrue\n```\n",
			want: []string{"x.md:4: failed with exit status 2"}},
		{name: "an HTTP error from curl",
			md:   "```sh\nbin/utcpd serve --data-dir '' &\ncurl -s http://127.0.0.1:8787/v1/tools/nosuch.tool\n```\n",
			want: []string{"x.md:1: failed with exit status 22 (the command at x.md:3)"}},
		{name: "missing output",
			md:   "<!-- docs-test: expect goodbye -->\n```sh\necho hello\n```\n",
			want: []string{`x.md:2: the output does not contain "goodbye"`}},
		{name: "console output that does not come",
			md:   "```console\n$ echo hello\ngoodbye\n```\n",
			want: []string{`the output does not contain "goodbye"`}},
		{name: "the wrong exit status",
			md:   "<!-- docs-test: exit 2 -->\n```sh\ntrue\n```\n",
			want: []string{"x.md:2: the last command exited 0, the docs say 2"}},
		{name: "a block that hangs",
			md:   "<!-- docs-test: timeout 1s -->\n```sh\nsleep 30\n```\n",
			want: []string{"x.md:2: still running after 1s"}},
		{name: "a foreground serve that cannot start",
			md:   "```sh\nbin/utcpd serve --config no-such-file.json\n```\n",
			want: []string{"x.md:1: failed with exit status 1 (the command at x.md:2)"}},
		{name: "a background command the harness cannot wait for",
			md:   "```sh\nsleep 30 &\n```\n",
			want: []string{"cannot tell when this background command is ready"}},
		{name: "a go test naming a test that is gone",
			md:   "```sh\ngo test -run TestNoLongerThere ./internal/e2e/docs/\n```\n",
			want: []string{"x.md:1: go test: -run \"TestNoLongerThere\" matches no"}},
	}
	root := repoRoot(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			blocks, err := parseMarkdown("x.md", []byte(c.md))
			if err != nil {
				t.Fatal(err)
			}
			problems := runDoc(t, root, blocks)
			for _, p := range problems {
				first, _, _ := strings.Cut(p, "\n")
				t.Logf("problem: %s", first)
			}
			if len(c.want) == 0 {
				for _, p := range problems {
					t.Errorf("a problem where none was expected: %s", p)
				}
				return
			}
			if len(problems) != len(c.want) {
				t.Errorf("%d problems, want %d: %q", len(problems), len(c.want), problems)
			}
			for i, w := range c.want {
				if i < len(problems) && !strings.Contains(problems[i], w) {
					t.Errorf("problem %d %q does not say %q", i, problems[i], w)
				}
			}
		})
	}
}
