package docs

import (
	"reflect"
	"strings"
	"testing"
)

func TestSplitScript(t *testing.T) {
	type want struct {
		words []string
		bg    bool
	}
	cases := []struct {
		name   string
		script string
		want   []want
	}{
		{"continuation", "curl -s -X POST http://x/call \\\n  -H 'A: b' -d '{}'\nnext\n",
			[]want{{[]string{"curl", "-s", "-X", "POST", "http://x/call", "-H", "A: b", "-d", "{}"}, false}, {[]string{"next"}, false}}},
		{"quote spanning lines", "curl -d '{\n  \"code\": \"x\"}'\necho done\n",
			[]want{{[]string{"curl", "-d", "{\n  \"code\": \"x\"}"}, false}, {[]string{"echo", "done"}, false}}},
		{"comment and background", "go run ./examples/servers/http -listen 127.0.0.1:8081 &   # the demo & more\n",
			[]want{{[]string{"go", "run", "./examples/servers/http", "-listen", "127.0.0.1:8081"}, true}}},
		{"comment only and blank", "# a comment\n\nx\n",
			[]want{{nil, false}, {nil, false}, {[]string{"x"}, false}}},
		{"and is not background", "a && b\n", []want{{[]string{"a"}, false}}},
		{"a list in the background", "a && b &\n", []want{{[]string{"a"}, true}}},
		{"assignments", "UTCPD_NPM_PEERS=1 go test ./x\n", []want{{[]string{"UTCPD_NPM_PEERS=1", "go", "test", "./x"}, false}}},
		{"command substitution", `curl -H "Authorization: Bearer $(cat ~/.local/state/utcpd/admin-token | tr -d ' ')" x` + "\n",
			[]want{{[]string{"curl", "-H", "Authorization: Bearer $(cat ~/.local/state/utcpd/admin-token | tr -d ' ')", "x"}, false}}},
		{"here-document", "cat > f.json <<'EOF'\n{\"a\": 1} &\nEOF\necho hi\n",
			[]want{{[]string{"cat"}, false}, {[]string{"echo", "hi"}, false}}},
		{"no final newline", "echo a", []want{{[]string{"echo", "a"}, false}}},
		{"escaped quote", `echo "a \"b\" c" 'd'` + "\n", []want{{[]string{"echo", `a "b" c`, "d"}, false}}},
		{"redirection ends the words", "echo hi >out 2>&1\n", []want{{[]string{"echo", "hi"}, false}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			segs, err := splitScript(c.script)
			if err != nil {
				t.Fatal(err)
			}
			var joined strings.Builder
			for _, s := range segs {
				joined.WriteString(s.Text)
			}
			if joined.String() != c.script {
				t.Errorf("the segments join to %q, not the script", joined.String())
			}
			if len(segs) != len(c.want) {
				t.Fatalf("%d segments %+v, want %d", len(segs), segs, len(c.want))
			}
			for i, w := range c.want {
				if !reflect.DeepEqual(segs[i].Words, w.words) || segs[i].Background != w.bg {
					t.Errorf("segment %d: words %q background %v, want %q %v", i, segs[i].Words, segs[i].Background, w.words, w.bg)
				}
			}
		})
	}
	for _, bad := range []string{"echo 'open\n", "echo \"open\n", "echo $(open\n", "cat <<EOF\nno end\n"} {
		if _, err := splitScript(bad); err == nil {
			t.Errorf("splitScript(%q) accepted it", bad)
		}
	}
}

func TestSplitScriptLines(t *testing.T) {
	segs, err := splitScript("a \\\n b\n'x\ny'\n\nc\n")
	if err != nil {
		t.Fatal(err)
	}
	var lines []int
	for _, s := range segs {
		lines = append(lines, s.Line)
	}
	if want := []int{0, 2, 4, 5}; !reflect.DeepEqual(lines, want) {
		t.Errorf("segment lines %v, want %v", lines, want)
	}
}

func TestParseMarkdown(t *testing.T) {
	md := "# T\n" +
		"```json\n{\"a\": 1}\n```\n" +
		"1. Step:\n\n" +
		"   <!-- docs-test: expect \"sum\": 5 -->\n" +
		"   <!-- docs-test: exit 3 -->\n\n" +
		"   ```sh\n   echo one\n     indented\n   ```\n" +
		"<!-- docs-test: skip (needs the cloud) -->\n" +
		"```bash\ncurl https://example.com\n```\n" +
		"```console\n$ utcpd call demo.add \\\n  --args '{}'\n{\"sum\": 5}\n...\n$ true\n```\n" +
		"<!-- docs-test: timeout 90s -->\n" +
		"~~~shell\nsleep 1\n~~~\n"
	blocks, err := parseMarkdown("x.md", []byte(md))
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 4 {
		t.Fatalf("%d blocks, want 4: %+v", len(blocks), blocks)
	}
	b := blocks[0]
	if b.Line != 10 || b.Lang != "sh" || b.Script != "echo one\n  indented\n" || b.Exit != 3 || !reflect.DeepEqual(b.Expect, []string{`"sum": 5`}) {
		t.Errorf("block 0: %+v", b)
	}
	if !reflect.DeepEqual(b.ScriptLine, []int{11, 12}) {
		t.Errorf("block 0's lines %v, want [11 12]", b.ScriptLine)
	}
	if blocks[1].Skip != "needs the cloud" {
		t.Errorf("block 1's skip %q", blocks[1].Skip)
	}
	c := blocks[2]
	if c.Script != "utcpd call demo.add \\\n  --args '{}'\ntrue\n" || !reflect.DeepEqual(c.Expect, []string{`{"sum": 5}`}) {
		t.Errorf("console block: script %q expect %q", c.Script, c.Expect)
	}
	if blocks[3].Timeout != "90s" || blocks[3].Lang != "shell" {
		t.Errorf("block 3: %+v", blocks[3])
	}

	for name, bad := range map[string]string{
		"directive before json":     "<!-- docs-test: skip (x) -->\n```json\n{}\n```\n",
		"directive before text":     "<!-- docs-test: expect x -->\ntext\n```sh\ntrue\n```\n",
		"skip without reason":       "<!-- docs-test: skip -->\n```sh\ntrue\n```\n",
		"unknown directive":         "<!-- docs-test: run-twice -->\n```sh\ntrue\n```\n",
		"bad exit":                  "<!-- docs-test: exit two -->\n```sh\ntrue\n```\n",
		"directive at the end":      "text\n<!-- docs-test: expect x -->\n",
		"unclosed fence":            "```sh\ntrue\n",
		"directive not on its line": "see <!-- docs-test: skip (x) --> here\n```sh\ntrue\n```\n",
		"console output first":      "```console\nout\n$ true\n```\n",
	} {
		if _, err := parseMarkdown("bad.md", []byte(bad)); err == nil {
			t.Errorf("%s: parseMarkdown accepted %q", name, bad)
		}
	}
}

func TestChecks(t *testing.T) {
	root := repoRoot(t)
	good := [][]string{
		{"go", "test", "-run", "TestDocs", "./internal/e2e/docs/"},
		{"go", "test", "-run", "^$", "-bench", ".", "-benchmem", "./registry/"},
		{"go", "test", "-race", "-count=1", "./internal/..."},
		{"npm", "ci", "--prefix", "internal/e2e/docs/testdata/peer"},
		{"make", "test"},
		{"make"},
	}
	for _, w := range good {
		if !checked(w) {
			t.Errorf("%q is not a checked command", w)
			continue
		}
		if err := check(root, w); err != nil {
			t.Errorf("%q: %v", w, err)
		}
	}
	bad := [][]string{
		{"go", "test", "-run", "TestNoSuchThing", "./internal/e2e/docs/"},
		{"go", "test", "-run", "^$", "-bench", "NoSuchBenchmark", "./internal/e2e/docs/"},
		{"go", "test", "-run", "(", "./internal/e2e/docs/"},
		{"go", "test", "-frobnicate", "./internal/e2e/docs/"},
		{"go", "test", "./no/such/package/"},
		{"go", "test", "github.com/utcpd/utcpd/registry"},
		{"npm", "ci", "--prefix", "internal/e2e/docs"},
		{"make", "no-such-target"},
	}
	for _, w := range bad {
		if err := check(root, w); err == nil {
			t.Errorf("%q passed the check", w)
		}
	}
	if checked([]string{"go", "run", "./cmd/utcpd"}) || checked([]string{"curl"}) {
		t.Error("go run or curl counted as checked commands")
	}

	peer := root + "/internal/e2e/docs/testdata/peer"
	if pkg, err := checkNPX(peer, []string{"npx", "@modelcontextprotocol/inspector@1.0.3", "--cli", "x"}); err != nil || pkg != "@modelcontextprotocol/inspector" {
		t.Errorf("npx at the pinned version: %q, %v", pkg, err)
	}
	for _, w := range [][]string{
		{"npx", "@modelcontextprotocol/inspector", "--cli"},
		{"npx", "@modelcontextprotocol/inspector@1.0.2", "--cli"},
		{"npx", "@modelcontextprotocol/inspector-cli@1.0.3"},
	} {
		if _, err := checkNPX(peer, w); err == nil {
			t.Errorf("%q passed the npx check", w)
		}
	}
}
