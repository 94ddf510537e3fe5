// Package shellword is the one bash lexer of utcpd: the rules that say,
// at any offset of a command line and in a given quote context, which
// lexical unit starts there (a quote, an expansion, an escape, an
// argument placeholder or a plain byte) and how long it is.
//
// Two packages read cli command lines and must agree on where each
// UTCP_ARG_<name>_UTCP_END placeholder stands: transports/cli, whose
// parser decides from it whether bash treats the placeholder as data and
// writes the reference that keeps its value one word, and guard/holguard,
// which renders the command with the values in place for HOL Guard.
// transports/cli drives Next from its recursive-descent parser (the end
// of a $(...) depends on the grammar of the commands inside it);
// guard/holguard uses Lexer, which tracks the nesting of quotes and
// expansions itself on top of Next.
//
// The package knows quoting and expansions only; which positions are
// data, and the grammar of commands, stay with transports/cli.
package shellword

import (
	"regexp"
	"strings"
)

// PlaceholderPrefix starts every argument placeholder.
const PlaceholderPrefix = "UTCP_ARG_"

// placeholderRE matches one argument placeholder. Names are restricted to
// characters that cannot change the shell's quoting state, so a
// placeholder never spans a quote.
var placeholderRE = regexp.MustCompile(`^UTCP_ARG_([A-Za-z0-9_.\-]+?)_UTCP_END`)

// placeholderAnyRE is placeholderRE, unanchored.
var placeholderAnyRE = regexp.MustCompile(placeholderRE.String()[1:])

// PlaceholderAt reports whether a placeholder starts at offset i of s,
// and if so the argument it names and the offset just after it.
func PlaceholderAt(s string, i int) (name string, end int, ok bool) {
	if !strings.HasPrefix(s[i:], PlaceholderPrefix) {
		return "", 0, false
	}
	m := placeholderRE.FindStringSubmatchIndex(s[i:])
	if m == nil {
		return "", 0, false
	}
	return s[i+m[2] : i+m[3]], i + m[1], true
}

// FindPlaceholders returns the names of the placeholders in s, in order,
// with repeats, whatever their context (for text bash does not lex, such
// as the body of a here-document).
func FindPlaceholders(s string) []string {
	var names []string
	for _, m := range placeholderAnyRE.FindAllStringSubmatch(s, -1) {
		names = append(names, m[1])
	}
	return names
}

// IsNameStart reports whether c may start a shell variable name.
func IsNameStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// IsNameByte reports whether c may stand in a shell variable name.
func IsNameByte(c byte) bool { return IsNameStart(c) || c >= '0' && c <= '9' }

// IsName reports whether s is made of name bytes only (and not empty).
func IsName(s string) bool {
	for i := 0; i < len(s); i++ {
		if !IsNameByte(s[i]) {
			return false
		}
	}
	return s != ""
}

// IsMeta reports whether c is a blank or an operator character, which
// ends an unquoted word.
func IsMeta(c byte) bool { return strings.IndexByte(" \t\n;&|()<>", c) >= 0 }

// Quoting is the set of lexical rules in force at an offset.
type Quoting uint8

const (
	Unquoted Quoting = iota // top level, and inside $(...), <(...), >(...), `...`
	Double                  // inside "...", $"..." (and a ${...} or arithmetic inside them)
	Single                  // inside '...'
	ANSI                    // inside $'...'
)

// Kind is the kind of a lexical unit.
type Kind uint8

const (
	// Char is one byte with no lexical meaning in its context: an
	// ordinary character, or a blank or operator for the caller to read.
	Char Kind = iota
	// Placeholder is UTCP_ARG_<name>_UTCP_END; Token.Name is name.
	Placeholder
	// Escape is a backslash and what it escapes: one byte, or a whole
	// placeholder, which a backslash keeps from being replaced; a lone
	// backslash at the end of the text.
	Escape
	// LineContinuation is a backslash and a newline.
	LineContinuation
	// Var is a simple parameter expansion: $name (ended by a
	// placeholder, as textual substitution would), $1, $@, $*, $#, $?,
	// $-, $$, $!.
	Var
	OpenSingle       // '
	OpenDouble       // " or $"
	OpenANSI         // $'
	OpenSubst        // $(
	OpenProcSubst    // <( or >(
	OpenArith        // $((
	OpenArithBracket // $[
	OpenParam        // ${
	Backquote        // `, which opens or closes a command substitution
	CloseQuote       // the ' that ends '...' or $'...'
	// Close ends a frame of Lexer other than '...' and $'...': " ) } ))
	// ] or `.
	Close
	// Comment is a comment up to, not including, the end of its line
	// (from Lexer only).
	Comment
)

// Token is one lexical unit: src[Start:End].
type Token struct {
	Kind       Kind
	Start, End int
	Name       string // the argument of a Placeholder
}

// Next returns the lexical unit that starts at offset i of src (i <
// len(src)) under quoting q.
//
// Under Double, a " is returned as OpenDouble: the caller decides
// whether it closes the string it reads or opens one nested in a ${...}.
// A ` is returned as Backquote: the caller decides whether it opens a
// command substitution or closes the one it is in.
func Next(src string, i int, q Quoting) Token {
	tok := func(k Kind, n int) Token { return Token{Kind: k, Start: i, End: min(i+n, len(src))} }
	if name, end, ok := PlaceholderAt(src, i); ok {
		return Token{Kind: Placeholder, Start: i, End: end, Name: name}
	}
	at := func(s string) bool { return strings.HasPrefix(src[i:], s) }
	c := src[i]
	switch q {
	case Single:
		if c == '\'' {
			return tok(CloseQuote, 1)
		}
		return tok(Char, 1)
	case ANSI:
		switch c {
		case '\'':
			return tok(CloseQuote, 1)
		case '\\':
			return escape(src, i)
		}
		return tok(Char, 1)
	}
	switch {
	case c == '\\':
		if q == Double && (i+1 >= len(src) || strings.IndexByte("$`\"\\\n", src[i+1]) < 0) {
			// Inside double quotes, a backslash before other characters
			// is an ordinary character.
			return tok(Char, 1)
		}
		return escape(src, i)
	case at("$(("):
		return tok(OpenArith, 3)
	case at("$("):
		return tok(OpenSubst, 2)
	case at("$["):
		return tok(OpenArithBracket, 2)
	case at("${"):
		return tok(OpenParam, 2)
	case c == '$' && i+1 < len(src) && (IsNameByte(src[i+1]) || strings.IndexByte("@*#?-$!", src[i+1]) >= 0):
		n := 2
		if IsNameStart(src[i+1]) {
			// A placeholder ends the name: $xUTCP_ARG_v_UTCP_END is $x
			// followed by the argument, as with textual substitution.
			for i+n < len(src) && IsNameByte(src[i+n]) && !IsPlaceholderAt(src, i+n) {
				n++
			}
		}
		return tok(Var, n)
	case c == '`':
		return tok(Backquote, 1)
	case c == '"':
		return tok(OpenDouble, 1)
	case q == Double:
		return tok(Char, 1)
	case c == '\'':
		return tok(OpenSingle, 1)
	case at("$'"):
		return tok(OpenANSI, 2)
	case at(`$"`):
		return tok(OpenDouble, 2)
	case at("<("), at(">("):
		return tok(OpenProcSubst, 2)
	}
	return tok(Char, 1)
}

// IsPlaceholderAt reports whether a placeholder starts at offset i of s.
func IsPlaceholderAt(s string, i int) bool {
	_, _, ok := PlaceholderAt(s, i)
	return ok
}

// escape reads the backslash at offset i and what it escapes.
func escape(src string, i int) Token {
	switch {
	case i+1 >= len(src):
		return Token{Kind: Escape, Start: i, End: i + 1}
	case src[i+1] == '\n':
		return Token{Kind: LineContinuation, Start: i, End: i + 2}
	}
	if _, end, ok := PlaceholderAt(src, i+1); ok {
		return Token{Kind: Escape, Start: i, End: end}
	}
	return Token{Kind: Escape, Start: i, End: i + 2}
}
