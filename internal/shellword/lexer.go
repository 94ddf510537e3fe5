package shellword

import "strings"

// FrameKind is a context a Lexer can be in.
type FrameKind uint8

const (
	TopLevel     FrameKind = iota // the command line itself
	SingleQuoted                  // '...'
	DoubleQuoted                  // "..." and $"..."
	ANSIQuoted                    // $'...'
	CommandSubst                  // $(...), <(...), >(...)
	Backquoted                    // `...`
	ParamExp                      // ${...}
	Arithmetic                    // $((...))
	ArithBracket                  // $[...]
)

// Frame is one open context.
type Frame struct {
	Kind FrameKind
	// InDouble: a ParamExp, Arithmetic or ArithBracket frame opened
	// inside double quotes, whose rules still apply.
	InDouble bool
	depth    int // unmatched ( in CommandSubst and Arithmetic, { in ParamExp, [ in ArithBracket
}

// Quoting returns the lexical rules in force inside f.
func (f Frame) Quoting() Quoting {
	switch {
	case f.Kind == SingleQuoted:
		return Single
	case f.Kind == ANSIQuoted:
		return ANSI
	case f.Kind == DoubleQuoted || f.InDouble:
		return Double
	}
	return Unquoted
}

// Lexer splits a whole command line into tokens, tracking the nesting of
// quotes and expansions. The tokens are contiguous and cover the text:
// their texts, concatenated, are the command line.
//
// Lexer knows no command grammar: it ends a $(...) at the ) that
// balances its parentheses, and a comment starts at a # that begins a
// word (after a blank or an operator character) outside quotes, ${...}
// and arithmetic.
type Lexer struct {
	src   string
	i     int
	stack []Frame
}

// NewLexer returns a lexer for src.
func NewLexer(src string) *Lexer {
	return &Lexer{src: src, stack: []Frame{{Kind: TopLevel}}}
}

// Stack returns the frames open after the token Next returned last,
// outermost first: for a Placeholder, the contexts it stands in. The
// slice is valid until the next call of Next.
func (l *Lexer) Stack() []Frame { return l.stack }

func (l *Lexer) top() *Frame { return &l.stack[len(l.stack)-1] }

func (l *Lexer) push(k FrameKind) {
	f := Frame{Kind: k}
	if k == ParamExp || k == Arithmetic || k == ArithBracket {
		f.InDouble = l.top().Quoting() == Double
	}
	l.stack = append(l.stack, f)
}

func (l *Lexer) pop() {
	if len(l.stack) > 1 {
		l.stack = l.stack[:len(l.stack)-1]
	}
}

func (l *Lexer) token(k Kind, n int) Token {
	t := Token{Kind: k, Start: l.i, End: l.i + n}
	l.i += n
	return t
}

// Next returns the next token, and false at the end of the text.
func (l *Lexer) Next() (Token, bool) {
	if l.i >= len(l.src) {
		return Token{}, false
	}
	f := l.top()
	q := f.Quoting()
	if q == Single || q == ANSI {
		t := Next(l.src, l.i, q)
		l.i = t.End
		if t.Kind == CloseQuote {
			l.pop()
		}
		return t, true
	}
	c := l.src[l.i]
	// A ` ends the command substitution it stands in, and every context
	// opened inside it.
	if c == '`' {
		for k := len(l.stack) - 1; k > 0; k-- {
			if l.stack[k].Kind == Backquoted {
				l.stack = l.stack[:k]
				return l.token(Close, 1), true
			}
		}
	}
	// The end of the current frame.
	switch {
	case f.Kind == DoubleQuoted && c == '"',
		f.Kind == CommandSubst && c == ')' && f.depth == 0,
		f.Kind == ParamExp && c == '}' && f.depth == 0,
		f.Kind == ArithBracket && c == ']' && f.depth == 0:
		l.pop()
		return l.token(Close, 1), true
	case f.Kind == Arithmetic && c == ')' && f.depth == 0:
		l.pop()
		if strings.HasPrefix(l.src[l.i:], "))") {
			return l.token(Close, 2), true
		}
		return l.token(Close, 1), true // unbalanced
	}
	t := Next(l.src, l.i, q)
	l.i = t.End
	switch t.Kind {
	case OpenSingle:
		l.push(SingleQuoted)
	case OpenDouble:
		l.push(DoubleQuoted)
	case OpenANSI:
		l.push(ANSIQuoted)
	case OpenSubst, OpenProcSubst:
		l.push(CommandSubst)
	case OpenArith:
		l.push(Arithmetic)
	case OpenArithBracket:
		l.push(ArithBracket)
	case OpenParam:
		l.push(ParamExp)
	case Backquote:
		l.push(Backquoted)
	case Char:
		if c == '#' && q == Unquoted && (f.Kind == TopLevel || f.Kind == CommandSubst || f.Kind == Backquoted) &&
			(t.Start == 0 || IsMeta(l.src[t.Start-1])) {
			end := strings.IndexByte(l.src[t.Start:], '\n')
			if end < 0 {
				end = len(l.src) - t.Start
			}
			l.i = t.Start + end
			t.End, t.Kind = l.i, Comment
			return t, true
		}
		switch {
		case f.Kind == CommandSubst && c == '(', f.Kind == Arithmetic && c == '(',
			f.Kind == ParamExp && c == '{', f.Kind == ArithBracket && c == '[':
			f.depth++
		case f.Kind == CommandSubst && c == ')', f.Kind == Arithmetic && c == ')',
			f.Kind == ParamExp && c == '}', f.Kind == ArithBracket && c == ']':
			f.depth--
		}
	}
	return t, true
}
