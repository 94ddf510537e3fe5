package shellword

import (
	"fmt"
	"strings"
	"testing"
)

func TestPlaceholderAt(t *testing.T) {
	tests := []struct {
		s    string
		i    int
		name string
		end  int
	}{
		{"UTCP_ARG_a_UTCP_END", 0, "a", 19},
		{"x UTCP_ARG_a.b-c_UTCP_END y", 2, "a.b-c", 25},
		{"UTCP_ARG_a_UTCP_END_UTCP_END", 0, "a", 19}, // the shortest name
		{"UTCP_ARG__UTCP_END", 0, "", -1},
		{"UTCP_ARG_a b_UTCP_END", 0, "", -1},
		{"UTCP_ARG_a", 0, "", -1},
		{"xUTCP_ARG_a_UTCP_END", 0, "", -1},
	}
	for _, tc := range tests {
		name, end, ok := PlaceholderAt(tc.s, tc.i)
		if tc.end < 0 {
			if ok {
				t.Errorf("PlaceholderAt(%q, %d) = %q, %d; want none", tc.s, tc.i, name, end)
			}
			continue
		}
		if !ok || name != tc.name || end != tc.end {
			t.Errorf("PlaceholderAt(%q, %d) = %q, %d, %v; want %q, %d", tc.s, tc.i, name, end, ok, tc.name, tc.end)
		}
	}
	if got := FindPlaceholders("a UTCP_ARG_x_UTCP_END $UTCP_ARG_y_UTCP_END 'UTCP_ARG_x_UTCP_END'"); fmt.Sprint(got) != "[x y x]" {
		t.Errorf("FindPlaceholders = %q", got)
	}
}

func TestNames(t *testing.T) {
	for s, want := range map[string]bool{"a": true, "_a1": true, "1a": true, "": false, "a-b": false, "a.b": false} {
		if IsName(s) != want {
			t.Errorf("IsName(%q) = %v", s, !want)
		}
	}
	if IsNameStart('1') || !IsNameStart('_') || !IsNameByte('9') || IsNameByte('-') {
		t.Error("name bytes")
	}
	for _, c := range []byte(" \t\n;&|()<>") {
		if !IsMeta(c) {
			t.Errorf("IsMeta(%q) = false", c)
		}
	}
	if IsMeta('a') || IsMeta('{') || IsMeta('`') {
		t.Error("IsMeta of a word byte")
	}
}

func TestNext(t *testing.T) {
	ph := "UTCP_ARG_v_UTCP_END"
	tests := []struct {
		src  string
		q    Quoting
		kind Kind
		n    int
	}{
		{ph + "x", Unquoted, Placeholder, len(ph)},
		{ph, Single, Placeholder, len(ph)},
		{ph, ANSI, Placeholder, len(ph)},
		{ph, Double, Placeholder, len(ph)},
		{`\` + ph, Unquoted, Escape, 1 + len(ph)},
		{`\` + ph, ANSI, Escape, 1 + len(ph)},
		{`\` + ph, Double, Char, 1}, // a backslash before U is plain inside "..."
		{`\` + ph, Single, Char, 1},
		{`\x`, Unquoted, Escape, 2},
		{`\`, Unquoted, Escape, 1},
		{"\\\nx", Unquoted, LineContinuation, 2},
		{"\\\nx", Double, LineContinuation, 2},
		{`\"`, Double, Escape, 2},
		{`\'`, ANSI, Escape, 2},
		{`'`, Single, CloseQuote, 1},
		{`'`, ANSI, CloseQuote, 1},
		{`"`, Single, Char, 1},
		{`'`, Unquoted, OpenSingle, 1},
		{`'`, Double, Char, 1},
		{`"`, Unquoted, OpenDouble, 1},
		{`"`, Double, OpenDouble, 1},
		{`$"x"`, Unquoted, OpenDouble, 2},
		{`$"x"`, Double, Char, 1},
		{`$'x'`, Unquoted, OpenANSI, 2},
		{`$'x'`, Double, Char, 1},
		{"$((1))", Unquoted, OpenArith, 3},
		{"$(ls)", Double, OpenSubst, 2},
		{"$[1]", Unquoted, OpenArithBracket, 2},
		{"${x}", Double, OpenParam, 2},
		{"<(ls)", Unquoted, OpenProcSubst, 2},
		{">(ls)", Double, Char, 1},
		{"`ls`", Double, Backquote, 1},
		{"$abc d", Unquoted, Var, 4},
		{"$a" + ph, Unquoted, Var, 2},
		{"$" + ph, Unquoted, Var, 1 + len(ph)}, // $UTCP_ARG_… is a variable
		{"$1abc", Unquoted, Var, 2},
		{"$@", Double, Var, 2},
		{"$$", Unquoted, Var, 2},
		{"$", Unquoted, Char, 1},
		{"$ ", Unquoted, Char, 1},
		{"a", Unquoted, Char, 1},
		{";", Unquoted, Char, 1},
	}
	for _, tc := range tests {
		tok := Next(tc.src, 0, tc.q)
		if tok.Kind != tc.kind || tok.End-tok.Start != tc.n || tok.Start != 0 {
			t.Errorf("Next(%q, %d) = kind %d [%d:%d]; want kind %d, %d bytes", tc.src, tc.q, tok.Kind, tok.Start, tok.End, tc.kind, tc.n)
		}
	}
	if tok := Next("x"+ph, 1, Unquoted); tok.Name != "v" || tok.Start != 1 || tok.End != 1+len(ph) {
		t.Errorf("placeholder token %+v", tok)
	}
}

// lex returns the tokens of src as text, each placeholder with the
// frames it stands in.
func lex(src string) string {
	var b []string
	l := NewLexer(src)
	for {
		tok, ok := l.Next()
		if !ok {
			return strings.Join(b, " ")
		}
		s := fmt.Sprintf("%d:%s", tok.Kind, src[tok.Start:tok.End])
		if tok.Kind == Placeholder {
			var fr []string
			for _, f := range l.Stack() {
				fr = append(fr, fmt.Sprintf("%d%s", f.Kind, map[bool]string{true: "d"}[f.InDouble]))
			}
			s = tok.Name + "@" + strings.Join(fr, ",")
		}
		b = append(b, s)
	}
}

func TestLexerContexts(t *testing.T) {
	ph := "UTCP_ARG_v_UTCP_END"
	tests := []struct{ src, frames string }{
		{ph, "0"},
		{"'" + ph + "'", "0,1"},
		{`"` + ph + `"`, "0,2"},
		{`$"` + ph + `"`, "0,2"},
		{`$'\'` + ph + `'`, "0,3"},
		{"$(a (b) " + ph + ")", "0,4"},
		{"$(a (b)) " + ph, "0"},
		{`"$(` + ph + `)"`, "0,2,4"},
		{"<(" + ph + ")", "0,4"},
		{"`" + ph + "`", "0,5"},
		{"\"`\"" + ph + "\"`\"", "0,2,5,2"},
		{"`\"`" + ph, "0"}, // a ` ends the substitution, and the string in it
		{"${x:-" + ph + "}", "0,6"},
		{`"${x:-` + ph + `}"`, "0,2,6d"},
		{`"${x:-'` + ph + `'}"`, "0,2,6d"},
		{`"${x:-"` + ph + `"}"`, "0,2,6d,2"},
		{"${x:-${y}" + ph + "}", "0,6"},
		{"${x:-{}" + ph + "}", "0,6"},
		{"$((1+(" + ph + ")))", "0,7"},
		{`"$((` + ph + `))"`, "0,2,7d"},
		{"$((1)) " + ph, "0"},
		{"$[a[1]+" + ph + "]", "0,8"},
		{"$[1] " + ph, "0"},
		{"'\"'" + ph, "0"},
		{`\"` + ph, "0"},
	}
	for _, tc := range tests {
		got := lex(tc.src)
		if !strings.Contains(got, "v@"+tc.frames+" ") && !strings.HasSuffix(got, "v@"+tc.frames) {
			t.Errorf("%s: placeholder not in frames %s:\n%s", tc.src, tc.frames, got)
		}
	}
}

func TestLexerNoPlaceholder(t *testing.T) {
	for _, src := range []string{
		`\UTCP_ARG_v_UTCP_END`,
		`$'\UTCP_ARG_v_UTCP_END'`,
		"$UTCP_ARG_v_UTCP_END",
		"ls # UTCP_ARG_v_UTCP_END",
		"ls;#UTCP_ARG_v_UTCP_END",
		"$(ls # UTCP_ARG_v_UTCP_END\n)",
	} {
		if got := lex(src); strings.Contains(got, "v@") {
			t.Errorf("%s: a placeholder was found: %s", src, got)
		}
	}
	for _, src := range []string{"a#UTCP_ARG_v_UTCP_END", "${x#UTCP_ARG_v_UTCP_END}", "\"# UTCP_ARG_v_UTCP_END\"", "$(( 1 # UTCP_ARG_v_UTCP_END))"} {
		if got := lex(src); !strings.Contains(got, "v@") {
			t.Errorf("%s: no placeholder found: %s", src, got)
		}
	}
}

func TestLexerComment(t *testing.T) {
	if got, want := lex("ls # x y\necho"), "0:l 0:s 0:  16:# x y 0:\n 0:e 0:c 0:h 0:o"; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// FuzzLexer checks that Lexer never panics and that its tokens are
// contiguous, not empty, and cover the input exactly; and that Next
// always reads at least one byte, never past the end.
func FuzzLexer(f *testing.F) {
	for _, s := range []string{
		"", "ls -la", "echo UTCP_ARG_a_UTCP_END", `echo "${x:-'UTCP_ARG_a_UTCP_END'}" ${x%%\}}`,
		"echo \"`cat \"UTCP_ARG_q_UTCP_END\"`\"", `case $x in (a|b) echo UTCP_ARG_v_UTCP_END ;; esac`,
		`echo $(( $(echo 1) )) UTCP_ARG_v_UTCP_END`, `echo $'a\'b' \UTCP_ARG_x_UTCP_END "\` + "`" + `"`,
		"cat <<EOF\nUTCP_ARG_v_UTCP_END\nEOF\n# c", `$[ $((1)) ] <(:) >(:) $"x" ${#x} $1 $`, `\`, `"`, `'`, "$(", "${", "`",
		"$((1)", "$(((", ")))", "}}}", "]]", `"$((`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		l := NewLexer(src)
		var b strings.Builder
		pos := 0
		for n := 0; ; n++ {
			if n > len(src) {
				t.Fatalf("%q: more tokens than bytes", src)
			}
			tok, ok := l.Next()
			if !ok {
				break
			}
			if tok.Start != pos || tok.End <= tok.Start || tok.End > len(src) {
				t.Fatalf("%q: token %+v after offset %d", src, tok, pos)
			}
			if tok.Kind == Placeholder {
				if name, end, ok := PlaceholderAt(src, tok.Start); !ok || name != tok.Name || end != tok.End {
					t.Fatalf("%q: placeholder token %+v", src, tok)
				}
			}
			if len(l.Stack()) == 0 || l.Stack()[0].Kind != TopLevel {
				t.Fatalf("%q: stack %+v", src, l.Stack())
			}
			b.WriteString(src[tok.Start:tok.End])
			pos = tok.End
		}
		if b.String() != src {
			t.Fatalf("tokens %q, input %q", b.String(), src)
		}
		for i := range len(src) {
			for _, q := range []Quoting{Unquoted, Double, Single, ANSI} {
				if tok := Next(src, i, q); tok.Start != i || tok.End <= i || tok.End > len(src) {
					t.Fatalf("Next(%q, %d, %d) = %+v", src, i, q, tok)
				}
			}
		}
	})
}
