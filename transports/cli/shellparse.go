package cli

import (
	"fmt"
	"path"
	"strings"

	"github.com/utcpd/utcpd/internal/shellword"
)

// This file holds the bash lexer and parser behind rewrite. It reads a
// command line well enough to know, for every argument placeholder, the
// quote context it stands in (to write the reference that keeps its value
// one literal word) and the syntactic position it stands in (to decide
// whether bash treats the value there as data). The decision is an
// allowlist: a placeholder is accepted only
//
//   - as (part of) an argument word of a command whose arguments bash
//     passes on as words: an external program, a function, or one of the
//     builtins in dataBuiltins;
//   - as the value of a plain assignment name=… (alone, as a command
//     prefix, or as an argument of declare, typeset, local, export or
//     readonly without options), unless name is one of bash's own
//     variables or is given attributes (declare -i, …) anywhere in the
//     template;
//   - as the target of a file redirection (<, >, >>, >|, <>, &>, &>>,
//     <<<);
//   - as the word of case WORD in, a word of for NAME in WORDS, or an
//     operand of a string or file test inside [[ ]];
//   - inside the word of ${name-word}, ${name:-word}, ${name+word},
//     ${name?word}, ${name=word} (and their : forms) or the pattern and
//     replacement of ${name#…}, ${name%…}, ${name/…/…}, ${name^…},
//     ${name,…}, when the expansion itself stands in one of the positions
//     above;
//
// single, double and $'...' quotes included, and inside command and
// process substitutions, whose commands follow the same rules. Every
// other position is refused, in particular every arithmetic context and
// every position where bash reads the value as a variable name or as
// code. A position the parser does not recognise is refused too.

// useKind says how bash treats the value of one placeholder occurrence.
type useKind int

const (
	useUnknown  useKind = iota // not classified: refused
	useRefused                 // in a position where bash evaluates it
	useArg                     // (part of) an argument word of a command
	useAssign                  // the value of a plain assignment
	useRedirect                // the target of a file redirection
	useWord                    // a word that is neither code nor an option: case WORD, for … in WORDS, [[ ]] operand
)

// use is one placeholder occurrence.
type use struct {
	name string
	kind useKind
	why  string // for useRefused: the position, in words
	cmd  string // the command whose word holds the placeholder, "" if none
	// lead: the placeholder stands at the start of an argument word (no
	// literal character precedes it), so a value starting with - would be
	// read as an option.
	lead bool
	// noDash: a value starting with - is refused even for an argument in
	// allow_dash_arguments (operands of test and [).
	noDash bool
	// assign names the variable the value is assigned to (an assignment,
	// or ${name=word}); checked once the whole template is read.
	assign string
	depth  int // nesting of command lists where the placeholder stands
}

func (u *use) allowed() bool {
	return u.kind == useArg || u.kind == useAssign || u.kind == useRedirect || u.kind == useWord
}

// The quote context of a placeholder, which selects the reference
// written for it, is the lexer's quoting.
type quoting = shellword.Quoting

const (
	qBare   = shellword.Unquoted // unquoted
	qDouble = shellword.Double   // inside "..." (or a ${...} inside "...")
	qSingle = shellword.Single   // inside '...'
	qANSI   = shellword.ANSI     // inside $'...'
)

type parser struct {
	src      string
	i        int
	out      strings.Builder
	ref      func(string) string
	res      *rewritten
	refuse   []string // enclosing contexts that evaluate their text
	assignTo []string // enclosing ${name=word} expansions
	depth    int      // nesting of command lists
	backtick int      // nesting of `...`
	heredocs []heredoc
}

type heredoc struct {
	delim string
	strip bool // <<-: leading tabs are removed
}

// word is what the parser learnt about one shell word.
type word struct {
	start   int // offset in src
	u0, u1  int // the uses created while reading the word: res.uses[u0:u1]
	lit     strings.Builder
	literal bool // no expansion and no placeholder: lit is its value
	quoted  bool // holds quotes or backslashes (so it is not a reserved word)
	slash   bool // holds a literal /
	litSeen bool // a literal character was read (for use.lead)
	first   byte // the first character of the word in src
	assign  string
}

func (p *parser) at(s string) bool { return strings.HasPrefix(p.src[p.i:], s) }

// placeholderAt reports whether a placeholder starts at offset j.
func (p *parser) placeholderAt(j int) bool { return shellword.IsPlaceholderAt(p.src, j) }

func (p *parser) copyN(n int) {
	if p.i+n > len(p.src) {
		n = len(p.src) - p.i
	}
	p.out.WriteString(p.src[p.i : p.i+n])
	p.i += n
}

// placeholder replaces the placeholder at p.i, if there is one, by a
// reference for quote context q, and records its use.
func (p *parser) placeholder(w *word, q quoting) bool {
	name, end, ok := shellword.PlaceholderAt(p.src, p.i)
	if !ok {
		return false
	}
	p.res.names = append(p.res.names, name)
	v := p.ref(name)
	switch q {
	case qDouble:
		// Inside "...", a backslash before the placeholder is an ordinary
		// character (bash keeps it), but before the "$" written here it
		// would escape the expansion: double it so it stays one literal
		// backslash. A run of backslashes pairs up into escapes, so only
		// an odd run ends in an ordinary one.
		run := 0
		for j := p.i - 1; j >= 0 && p.src[j] == '\\'; j-- {
			run++
		}
		if run%2 == 1 {
			p.out.WriteByte('\\')
		}
		p.out.WriteString("${" + v + "}")
	case qSingle:
		p.out.WriteString(`'"$` + v + `"'`)
	case qANSI:
		p.out.WriteString(`'"$` + v + `"$'`)
	default:
		p.out.WriteString(`"$` + v + `"`)
	}
	p.i = end
	u := use{name: name, depth: p.depth}
	if w != nil {
		u.lead = !w.litSeen
		w.literal = false
	}
	if n := len(p.assignTo); n > 0 {
		u.assign = p.assignTo[n-1]
	}
	if len(p.refuse) > 0 {
		u.kind, u.why = useRefused, p.refuse[0]
	}
	p.res.uses = append(p.res.uses, u)
	return true
}

// escaped copies the escape t (an Escape or LineContinuation token at
// p.i): the backslash and what it escapes; a placeholder right after the
// backslash is copied whole and not replaced.
func (p *parser) escaped(w *word, count bool, t shellword.Token) {
	n := t.End - t.Start
	if t.Kind == shellword.LineContinuation || n == 1 { // a lone \ at the end
		p.copyN(n)
		return
	}
	if w != nil {
		w.quoted = true
		w.lit.WriteString(p.src[p.i+1 : p.i+n])
		if count {
			w.litSeen = true
		}
	}
	p.copyN(n)
}

// literal copies one literal byte of a word.
func (p *parser) literal(w *word, count bool) {
	c := p.src[p.i]
	if w != nil {
		w.lit.WriteByte(c)
		if count {
			w.litSeen = true
			if c == '/' {
				w.slash = true
			}
		}
	}
	p.copyN(1)
}

// expansionDone marks the end of an expansion in w: the word is no longer
// literal, and an unquoted expansion may split the word, so what follows
// may start a new one.
func expansionDone(w *word, q quoting) {
	if w == nil {
		return
	}
	w.literal = false
	if q == qBare {
		w.litSeen = false
	}
}

// unit reads one quoted string, expansion, escape or placeholder at p.i,
// as part of word w (nil outside words) in quote context q (qBare or
// qDouble). count says whether its literal characters count for w.lead.
// It reports false, reading nothing, when p.i holds a plain character.
func (p *parser) unit(w *word, q quoting, count bool) bool {
	if p.i >= len(p.src) {
		return false
	}
	t := shellword.Next(p.src, p.i, q)
	switch t.Kind {
	case shellword.Placeholder:
		return p.placeholder(w, q)
	case shellword.Escape, shellword.LineContinuation:
		p.escaped(w, count, t)
		return true
	case shellword.OpenArith:
		p.copyN(3)
		p.arith("))", "an arithmetic expansion $((…))", q)
		expansionDone(w, q)
		return true
	case shellword.OpenSubst, shellword.OpenProcSubst:
		p.copyN(2)
		p.depth++
		p.list(')')
		p.depth--
		p.copyN(1)
		expansionDone(w, q)
		return true
	case shellword.OpenArithBracket:
		p.copyN(2)
		p.arith("]", "an arithmetic expansion $[…]", q)
		expansionDone(w, q)
		return true
	case shellword.OpenParam:
		p.param(w, q)
		expansionDone(w, q)
		return true
	case shellword.Var:
		p.copyN(t.End - t.Start)
		expansionDone(w, q)
		return true
	case shellword.Backquote:
		if p.backtick > 0 {
			return false // the end of the enclosing `...`
		}
		p.copyN(1)
		p.backtick++
		p.depth++
		p.list('`')
		p.depth--
		p.backtick--
		p.copyN(1)
		expansionDone(w, q)
		return true
	case shellword.OpenDouble:
		if w != nil {
			w.quoted = true
		}
		p.copyN(t.End - t.Start) // " or $"
		p.double(w, count)
		return true
	case shellword.OpenSingle:
		if w != nil {
			w.quoted = true
		}
		p.copyN(1)
		p.single(w, count)
		return true
	case shellword.OpenANSI:
		if w != nil {
			w.quoted = true
			w.literal = false // escapes are not decoded into lit
		}
		p.copyN(2)
		p.ansi(w, count)
		return true
	}
	return false
}

// double reads the rest of a "..." string, after its opening quote.
func (p *parser) double(w *word, count bool) {
	for p.i < len(p.src) {
		if p.src[p.i] == '"' {
			p.copyN(1)
			return
		}
		if p.unit(w, qDouble, count) {
			continue
		}
		if p.src[p.i] == '`' { // the end of an enclosing `...`: unbalanced
			return
		}
		p.literal(w, count)
	}
}

// single reads the rest of a '...' string.
func (p *parser) single(w *word, count bool) { p.quoted(w, count, qSingle) }

// ansi reads the rest of a $'...' string.
func (p *parser) ansi(w *word, count bool) { p.quoted(w, count, qANSI) }

// quoted reads the rest of a '...' (q qSingle) or $'...' (q qANSI) string.
func (p *parser) quoted(w *word, count bool, q quoting) {
	for p.i < len(p.src) {
		switch t := shellword.Next(p.src, p.i, q); t.Kind {
		case shellword.Placeholder:
			p.placeholder(w, q)
		case shellword.CloseQuote:
			p.copyN(1)
			return
		case shellword.Escape, shellword.LineContinuation:
			p.escaped(w, count, t)
		default:
			p.literal(w, count)
		}
	}
}

// arith reads an arithmetic context up to and including close ("))" or
// "]"), refusing every placeholder in it, nested ones included.
func (p *parser) arith(close, why string, q quoting) {
	p.refuse = append(p.refuse, why)
	defer func() { p.refuse = p.refuse[:len(p.refuse)-1] }()
	depth := 0
	for p.i < len(p.src) {
		if depth == 0 && p.at(close) {
			p.copyN(len(close))
			return
		}
		c := p.src[p.i]
		if c == '`' && p.backtick > 0 {
			return
		}
		if p.unit(nil, q, false) {
			continue
		}
		switch {
		case close == "))" && c == '(', close == "]" && c == '[':
			depth++
		case close == "))" && c == ')', close == "]" && c == ']':
			if depth > 0 {
				depth--
			} else if close == "))" {
				return // unbalanced: let the caller see the )
			}
		}
		p.copyN(1)
	}
}

// Parameter expansion operators that take a word bash expands as data.
var paramOps = []string{
	":-", ":=", ":+", ":?", "-", "=", "+", "?",
	"##", "#", "%%", "%", "//", "/#", "/%", "/", "^^", "^", ",,", ",",
}

// param reads a ${...} expansion, part of word w, in quote context q.
func (p *parser) param(w *word, q quoting) {
	p.copyN(2)
	if p.i < len(p.src) && (p.src[p.i] == '#' || p.src[p.i] == '!') {
		p.copyN(1)
	}
	// The parameter.
	name := ""
	switch {
	case p.placeholderAt(p.i):
		p.refuse = append(p.refuse, "a parameter name ${…}")
		p.placeholder(nil, q)
		p.refuse = p.refuse[:len(p.refuse)-1]
	case p.i < len(p.src) && shellword.IsNameByte(p.src[p.i]):
		j := p.i
		for j < len(p.src) && shellword.IsNameByte(p.src[j]) && !p.placeholderAt(j) {
			j++
		}
		name = p.src[p.i:j]
		p.copyN(j - p.i)
	case p.i < len(p.src) && strings.IndexByte("@*#?-$!", p.src[p.i]) >= 0:
		p.copyN(1)
	}
	if p.at("[") {
		p.copyN(1)
		p.arith("]", "an array subscript, which bash evaluates as arithmetic", q)
	}
	if p.at("}") {
		p.copyN(1)
		return
	}
	op := ""
	for _, o := range paramOps {
		if p.at(o) {
			op = o
			break
		}
	}
	why := ""
	switch {
	case op != "":
		p.copyN(len(op))
	case p.at(":"):
		why = "a substring offset or length ${name:offset:length}, which bash evaluates as arithmetic"
	case p.at("@"):
		why = "a parameter transformation ${name@…}"
	default:
		why = "a parameter expansion form utcpd does not recognise"
	}
	if why != "" {
		p.refuse = append(p.refuse, why)
		defer func() { p.refuse = p.refuse[:len(p.refuse)-1] }()
	}
	if op == "=" || op == ":=" {
		p.assignTo = append(p.assignTo, name)
		defer func() { p.assignTo = p.assignTo[:len(p.assignTo)-1] }()
	}
	// The word, up to the matching }.
	pq := qBare
	if q == qDouble {
		pq = qDouble
	}
	depth := 0
	for p.i < len(p.src) {
		c := p.src[p.i]
		if c == '}' && depth == 0 {
			p.copyN(1)
			return
		}
		if c == '`' && p.backtick > 0 {
			return
		}
		if pq == qDouble && c == '\'' {
			p.literal(w, false) // ' is an ordinary character in "${x:-...}"
			continue
		}
		if p.unit(w, pq, false) {
			continue
		}
		switch c {
		case '{':
			depth++
		case '}':
			depth--
		}
		p.literal(w, false)
	}
}

// isWordEnd reports whether p.i ends an unquoted word.
func (p *parser) isWordEnd() bool {
	if p.i >= len(p.src) {
		return true
	}
	c := p.src[p.i]
	if c == '`' && p.backtick > 0 {
		return true
	}
	if (c == '<' || c == '>') && p.i+1 < len(p.src) && p.src[p.i+1] == '(' {
		return false
	}
	return shellword.IsMeta(c)
}

// word reads one word. assignPos says the word may be an assignment
// (name=value, name+=value, name[subscript]=value, name=(...)): the
// subscript is then an arithmetic context, and w.assign names the
// variable.
func (p *parser) word(assignPos bool) *word {
	w := &word{start: p.i, u0: len(p.res.uses), literal: true}
	if p.i < len(p.src) {
		w.first = p.src[p.i]
	}
	if assignPos && p.i < len(p.src) && shellword.IsNameStart(p.src[p.i]) && !p.placeholderAt(p.i) {
		j := p.i
		for j < len(p.src) && shellword.IsNameByte(p.src[j]) && !p.placeholderAt(j) {
			j++
		}
		name := p.src[p.i:j]
		rest := p.src[j:]
		switch {
		case strings.HasPrefix(rest, "="), strings.HasPrefix(rest, "+="):
			n := j - p.i + 1
			if rest[0] == '+' {
				n++
			}
			w.lit.WriteString(p.src[p.i : p.i+n])
			p.copyN(n)
			w.assign = name
			w.litSeen = true
		case strings.HasPrefix(rest, "["):
			w.lit.WriteString(p.src[p.i : j+1])
			p.copyN(j - p.i + 1)
			p.arith("]", "an array subscript, which bash evaluates as arithmetic", qBare)
			w.literal = false
			if p.at("=") || p.at("+=") {
				n := 1
				if p.at("+=") {
					n = 2
				}
				p.copyN(n)
				w.assign = name
			}
			w.litSeen = true
		}
		if w.assign != "" && p.at("(") {
			p.array(w)
			w.u1 = len(p.res.uses)
			return w
		}
	}
	for !p.isWordEnd() {
		if p.unit(w, qBare, true) {
			continue
		}
		c := p.src[p.i]
		if c == '{' || c == ',' {
			// Brace expansion can make what follows the start of a word.
			p.literal(w, false)
			w.litSeen = false
			continue
		}
		p.literal(w, true)
	}
	w.u1 = len(p.res.uses)
	return w
}

// array reads a compound array assignment name=(...): its elements may
// be subscripts, so every placeholder in it is refused.
func (p *parser) array(w *word) {
	w.literal = false
	p.copyN(1)
	p.refuse = append(p.refuse, "a compound array assignment name=(…)")
	defer func() { p.refuse = p.refuse[:len(p.refuse)-1] }()
	for p.i < len(p.src) {
		c := p.src[p.i]
		switch {
		case c == ')':
			p.copyN(1)
			return
		case c == ' ' || c == '\t' || c == '\n':
			p.copyN(1)
		case c == '`' && p.backtick > 0:
			return
		case p.isWordEnd():
			p.copyN(1)
		default:
			p.word(false)
		}
	}
}

// refuse refuses every use of word w that is not refused already, nested
// ones included.
func (p *parser) refuseWord(w *word, why, cmd string) { p.refuseRange(w.u0, w.u1, why, cmd) }

func (p *parser) refuseRange(u0, u1 int, why, cmd string) {
	for k := u0; k < u1; k++ {
		u := &p.res.uses[k]
		if u.kind != useRefused {
			u.kind, u.why, u.cmd = useRefused, why, cmd
		}
	}
}

// classify gives kind to the placeholders that stand directly in word w
// (not those of nested commands).
func (p *parser) classify(w *word, kind useKind, cmd string, noDash bool) {
	for k := w.u0; k < w.u1; k++ {
		u := &p.res.uses[k]
		if u.depth != p.depth || u.kind != useUnknown {
			continue
		}
		u.kind, u.cmd, u.noDash = kind, cmd, noDash
	}
}

func (p *parser) skipBlanks() {
	for p.i < len(p.src) && (p.src[p.i] == ' ' || p.src[p.i] == '\t' || p.at("\\\n")) {
		if p.src[p.i] == '\\' {
			p.copyN(2)
		} else {
			p.copyN(1)
		}
	}
}

// comment copies a comment up to, not including, the end of its line.
func (p *parser) comment() {
	end := strings.IndexByte(p.src[p.i:], '\n')
	if end < 0 {
		end = len(p.src) - p.i
	}
	p.copyN(end)
}

// readHeredocs reads the bodies of the here-documents whose operators
// the line just ended held. Their placeholders are refused.
func (p *parser) readHeredocs() {
	docs := p.heredocs
	p.heredocs = nil
	for _, d := range docs {
		for p.i < len(p.src) {
			end := strings.IndexByte(p.src[p.i:], '\n')
			if end < 0 {
				end = len(p.src) - p.i
			}
			line := p.src[p.i : p.i+end]
			check := line
			if d.strip {
				check = strings.TrimLeft(check, "\t")
			}
			if check == d.delim {
				p.copyN(end + 1)
				break
			}
			for _, name := range shellword.FindPlaceholders(line) {
				p.res.names = append(p.res.names, name)
				p.res.uses = append(p.res.uses, use{name: name, kind: useRefused, why: "a here-document", depth: p.depth})
			}
			p.copyN(end + 1)
		}
	}
}

// Command kinds.
const (
	modeNone      = iota
	modeForName   // for/select: the next word is the loop variable
	modeForIn     // for NAME: expecting in, ; or do
	modeForWords  // for NAME in: the words
	modeCaseWord  // case: the next word is the subject
	modeCaseIn    // case WORD: expecting in
	modeFuncName  // function: the next word is the name
	modeAfterName // a function name was read: () may follow
)

// cmdState is the simple command the parser is in.
type cmdState struct {
	p        *parser
	args     bool   // the command name was read
	name     string // the command's name, its base name for a path
	dynamic  bool   // the name is not a literal word
	external bool   // the name is a path
	wrapper  string // command, builtin or exec: the next word is the command
	execArg  bool   // exec -a: the next word is argv[0]
	prev     string // the previous argument, when it was literal
	mode     int
	decl     []*word // the arguments of a declaration builtin
	shellC   bool    // a shell given -c: the next operand is code
	shellRan bool    // that operand was read
	nargs    int     // arguments read
	nameWord *word   // the command name word
}

func (c *cmdState) reset() {
	p := c.p
	*c = cmdState{p: p}
}

// Builtins whose arguments bash passes on as words. Their placeholders
// are accepted; printf -v, wait -p and test -v/-R operands excepted.
var dataBuiltins = map[string]bool{
	"echo": true, "printf": true, "cd": true, "pwd": true, "test": true, "[": true,
	"true": true, "false": true, ":": true, "exit": true, "return": true, "shift": true,
	"break": true, "continue": true, "kill": true, "umask": true, "set": true,
	"type": true, "times": true, "jobs": true, "fg": true, "bg": true, "disown": true,
	"pushd": true, "popd": true, "dirs": true, "help": true, "logout": true,
	"suspend": true, "wait": true, "caller": true, "ulimit": true,
}

// declBuiltins assign to the variables they are given.
var declBuiltins = map[string]bool{"declare": true, "typeset": true, "local": true, "export": true, "readonly": true}

// refusedBuiltins are the other bash builtins, with why their arguments
// are not data.
var refusedBuiltins = map[string]string{
	"eval": "evaluates its arguments as code", "source": "reads a file of code", ".": "reads a file of code",
	"let": "evaluates its arguments as arithmetic", "read": "takes variable names",
	"mapfile": "takes a variable name and a callback", "readarray": "takes a variable name and a callback",
	"unset": "takes variable names, whose subscripts bash evaluates", "getopts": "takes a variable name",
	"trap": "takes code", "alias": "defines code", "unalias": "takes alias names",
	"compgen": "expands its word list", "complete": "takes code", "compopt": "takes completion options",
	"bind": "takes key bindings and code", "enable": "loads builtins", "fc": "runs an editor on history",
	"history": "writes files and history", "hash": "defines command paths", "shopt": "changes shell options",
}

// shells are programs that run their -c operand as code.
var shells = map[string]bool{"bash": true, "sh": true, "dash": true, "zsh": true, "ksh": true, "mksh": true, "ash": true, "rbash": true, "busybox": true}

func (c *cmdState) display() string {
	if c.dynamic {
		return "(a command named by an expansion)"
	}
	return c.name
}

// setName records the command name word w.
func (c *cmdState) setName(w *word) {
	c.args = true
	c.nameWord = w
	switch {
	case w.literal:
		c.name = w.lit.String()
		if strings.Contains(c.name, "/") {
			c.external = true
			c.name = path.Base(c.name)
		}
	case w.slash:
		c.external = true
		c.name = path.Base(strings.Trim(c.p.src[w.start:c.p.i], `"'`))
	default:
		c.dynamic = true
	}
	if !c.external && (c.name == "command" || c.name == "builtin" || c.name == "exec") {
		c.wrapper = c.name
	}
}

// word handles word w of the current command.
func (c *cmdState) word(w *word, cases *[]int) {
	p := c.p
	lit := ""
	if w.literal && !w.quoted {
		lit = w.lit.String()
	}
	switch c.mode {
	case modeForName:
		p.refuseWord(w, "the variable name of a for or select loop", "for")
		c.mode = modeForIn
		return
	case modeForIn:
		switch lit {
		case "in":
			c.mode = modeForWords
			return
		case "do":
			c.reset()
			return
		}
		c.mode = modeNone
	case modeForWords:
		p.classify(w, useWord, "for", false)
		return
	case modeCaseWord:
		p.classify(w, useWord, "case", false)
		c.mode = modeCaseIn
		return
	case modeCaseIn:
		c.mode = modeNone
		if lit == "in" {
			*cases = append(*cases, casePatterns)
			c.reset()
			return
		}
	case modeFuncName:
		p.refuseWord(w, "a function name", "function")
		c.reset()
		return
	}
	if !c.args {
		if w.assign != "" {
			p.classify(w, useAssign, "", false)
			for k := w.u0; k < w.u1; k++ {
				if p.res.uses[k].depth == p.depth && p.res.uses[k].assign == "" {
					p.res.uses[k].assign = w.assign
				}
			}
			return
		}
		switch lit {
		case "if", "then", "elif", "else", "do", "while", "until", "{", "!", "time", "coproc", "fi", "done", "}":
			return
		case "esac":
			if n := len(*cases); n > 0 {
				*cases = (*cases)[:n-1]
			}
			return
		case "for", "select":
			c.mode = modeForName
			return
		case "case":
			c.mode = modeCaseWord
			return
		case "function":
			c.mode = modeFuncName
			return
		case "[[":
			p.test()
			c.args = true
			c.name = "[["
			return
		}
		p.refuseWord(w, "the command name", "")
		c.setName(w)
		return
	}
	c.arg(w)
	c.nargs++
	if w.literal {
		c.prev = w.lit.String()
	} else {
		c.prev = ""
	}
}

// arg handles an argument word of the current command.
func (c *cmdState) arg(w *word) {
	p := c.p
	if c.wrapper != "" {
		if w.literal && strings.HasPrefix(w.lit.String(), "-") {
			switch o := w.lit.String(); {
			case c.wrapper == "command" && (strings.Contains(o, "v") || strings.Contains(o, "V")):
				c.wrapper = ""
				c.name = "command -v"
			case c.wrapper == "exec" && o == "-a":
				c.execArg = true
			}
			return
		}
		if c.execArg {
			c.execArg = false
			p.classify(w, useArg, "exec", false)
			return
		}
		p.refuseWord(w, "the command name", c.wrapper)
		exec := c.wrapper == "exec"
		c.wrapper = ""
		c.setName(w)
		if exec && c.wrapper == "" && !c.dynamic {
			c.external = true // exec runs programs, never builtins
		}
		return
	}
	if c.dynamic {
		p.refuseWord(w, "an argument of a command named by an expansion (it could be a builtin that evaluates it)", c.display())
		return
	}
	name := c.name
	if !c.external {
		if declBuiltins[name] {
			c.decl = append(c.decl, w)
			return
		}
		if why, ok := refusedBuiltins[name]; ok {
			p.refuseWord(w, "an argument of "+name+", which "+why, name)
			return
		}
		switch name {
		case "printf":
			if c.prev == "-v" || (w.first == '-' && strings.HasPrefix(p.src[w.start:], "-v")) {
				p.refuseWord(w, "the variable name of printf -v", name)
				return
			}
		case "wait":
			if c.prev == "-p" {
				p.refuseWord(w, "the variable name of wait -p", name)
				return
			}
		case "test", "[":
			if c.prev == "-v" || c.prev == "-R" {
				p.refuseWord(w, "the variable name of "+name+" "+c.prev, name)
				return
			}
			p.classify(w, useArg, name, true)
			return
		}
	}
	if shells[name] {
		switch {
		case w.literal && len(w.lit.String()) > 1 && w.lit.String()[0] == '-' && w.lit.String()[1] != '-':
			if strings.Contains(w.lit.String(), "c") {
				c.shellC = true
			}
			return
		case c.shellC && !c.shellRan:
			c.shellRan = true
			p.refuseWord(w, "the command string of "+name+" -c, which is code", name)
			return
		}
	}
	p.classify(w, useArg, name, false)
}

// end finishes the current command: the arguments of a declaration
// builtin are judged together, since an option anywhere changes them all.
func (c *cmdState) end(attributed map[string]bool) {
	p := c.p
	if len(c.decl) > 0 {
		opts := false
		for _, w := range c.decl {
			if w.first == '-' || w.first == '+' {
				opts = true
			}
		}
		for _, w := range c.decl {
			switch {
			case opts:
				if w.assign != "" {
					attributed[w.assign] = true
				} else if w.literal && shellword.IsName(w.lit.String()) {
					attributed[w.lit.String()] = true
				}
				p.refuseWord(w, "an argument of "+c.name+" with options, which can make bash evaluate values as arithmetic or names", c.name)
			case w.assign != "":
				for k := w.u0; k < w.u1; k++ {
					u := &p.res.uses[k]
					if u.depth == p.depth && u.kind == useUnknown {
						u.kind, u.cmd = useAssign, c.name
						if u.assign == "" {
							u.assign = w.assign
						}
					}
				}
			default:
				p.refuseWord(w, "a variable name given to "+c.name, c.name)
			}
		}
	}
	if c.wrapper != "" && c.wrapper != "exec" {
		c.wrapper = ""
	}
	c.reset()
}

// Case statement states.
const (
	casePatterns = iota + 1 // reading the patterns of a clause
	caseBody                // reading a clause's commands
)

// list reads commands up to term (0 for the end of the text, ')' or '`'),
// leaving p.i at term.
func (p *parser) list(term byte) {
	attributed := p.res.attributed
	c := &cmdState{p: p}
	var cases []int
	for p.i < len(p.src) {
		ch := p.src[p.i]
		if n := len(cases); n > 0 && cases[n-1] == casePatterns {
			switch {
			case ch == ' ' || ch == '\t' || ch == '\n' || ch == '(' || ch == '|':
				p.copyN(1)
				if ch == '\n' {
					p.readHeredocs()
				}
				continue
			case ch == ')':
				p.copyN(1)
				cases[n-1] = caseBody
				c.reset()
				continue
			case ch == '#':
				p.comment()
				continue
			case ch == term || (ch == '`' && p.backtick > 0):
				c.end(attributed)
				return
			case p.isWordEnd():
				p.copyN(1)
				continue
			}
			w := p.word(false)
			if w.literal && !w.quoted && w.lit.String() == "esac" {
				cases = cases[:n-1]
				c.reset()
				c.args = true
				continue
			}
			p.refuseWord(w, "a case pattern", "case")
			continue
		}
		if term != 0 && ch == term {
			c.end(attributed)
			return
		}
		if ch == '`' && p.backtick > 0 {
			c.end(attributed)
			return
		}
		switch {
		case ch == ' ' || ch == '\t':
			p.copyN(1)
		case p.at("\\\n"):
			p.copyN(2)
		case ch == '\n':
			c.end(attributed)
			p.copyN(1)
			p.readHeredocs()
		case ch == '#':
			p.comment()
		case ch == ';' || ch == '&' && !p.at("&>") || ch == '|':
			n := 1
			for _, op := range []string{";;&", ";;", ";&", "&&", "||", "|&"} {
				if p.at(op) {
					n = len(op)
					break
				}
			}
			op := p.src[p.i : p.i+n]
			c.end(attributed)
			p.copyN(n)
			if k := len(cases); k > 0 && (op == ";;" || op == ";&" || op == ";;&") {
				cases[k-1] = casePatterns
			}
		case ch == '<' || ch == '>' || p.at("&>"):
			if (ch == '<' || ch == '>') && p.i+1 < len(p.src) && p.src[p.i+1] == '(' {
				c.word(p.word(false), &cases)
				continue
			}
			p.redirect()
		case ch == '(':
			if !c.args && c.mode == modeNone && p.at("((") || c.mode == modeForName && p.at("((") {
				p.copyN(2)
				p.arith("))", "an arithmetic command ((…)), which bash evaluates as arithmetic", qBare)
				c.mode = modeNone
				c.args = true
				c.name = "(("
				continue
			}
			if c.args && c.nargs == 0 && c.nameWord != nil && p.isFuncDef() {
				p.refuseWord(c.nameWord, "a function name", "")
				c.reset()
				continue
			}
			p.copyN(1)
			c.end(attributed)
			p.depth++
			p.list(')')
			p.depth--
			p.copyN(1)
			c.args = true
		case ch == ')':
			p.copyN(1) // unbalanced
		default:
			start := p.i
			w := p.word(!c.args && c.mode == modeNone || declBuiltins[c.name] && !c.external && c.args)
			if p.i == start { // cannot happen; never loop forever
				p.copyN(1)
				continue
			}
			if w.literal && !w.quoted && p.i < len(p.src) && (p.src[p.i] == '<' || p.src[p.i] == '>') && isIONumber(w.lit.String()) {
				continue // 2>file, {fd}>file
			}
			c.word(w, &cases)
		}
	}
	c.end(attributed)
}

// isFuncDef reports whether p.i starts the () of a function definition.
func (p *parser) isFuncDef() bool {
	j := p.i + 1
	for j < len(p.src) && (p.src[j] == ' ' || p.src[j] == '\t') {
		j++
	}
	if j < len(p.src) && p.src[j] == ')' {
		p.copyN(j + 1 - p.i)
		return true
	}
	return false
}

func isIONumber(s string) bool {
	if s == "" {
		return false
	}
	if s[0] == '{' && s[len(s)-1] == '}' {
		return shellword.IsName(s[1 : len(s)-1])
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// redirect reads a redirection operator at p.i and its target word.
func (p *parser) redirect() {
	op := ""
	for _, o := range []string{"&>>", "&>", "<<<", "<<-", "<<", "<>", "<&", ">>", ">|", ">&", "<", ">"} {
		if p.at(o) {
			op = o
			break
		}
	}
	p.copyN(len(op))
	p.skipBlanks()
	if p.isWordEnd() {
		return
	}
	w := p.word(false)
	switch op {
	case "<<", "<<-":
		p.refuseWord(w, "a here-document delimiter", "")
		delim := w.lit.String()
		p.heredocs = append(p.heredocs, heredoc{delim: delim, strip: op == "<<-"})
	case "<&", ">&":
		p.refuseWord(w, "the target of "+op+", a file descriptor", "")
	default:
		p.classify(w, useRedirect, op, false)
	}
}

// test reads a [[ ... ]] expression after its [[.
func (p *parser) test() {
	u0 := len(p.res.uses)
	arith := false
	name := ""
	var words []*word
	for p.i < len(p.src) {
		p.skipBlanks()
		if p.i >= len(p.src) {
			break
		}
		if p.at("]]") && (p.i+2 >= len(p.src) || strings.IndexByte(" \t\n;&|)", p.src[p.i+2]) >= 0) {
			p.copyN(2)
			break
		}
		c := p.src[p.i]
		if c == '`' && p.backtick > 0 {
			break
		}
		if c == '\n' || p.isWordEnd() {
			p.copyN(1) // (, ), <, >, &&, ||: operators of the expression
			continue
		}
		w := p.word(false)
		if w.literal && !w.quoted {
			switch s := w.lit.String(); s {
			case "-eq", "-ne", "-lt", "-le", "-gt", "-ge":
				arith = true
				continue
			case "-v", "-R":
				name = s
				continue
			}
		}
		if name != "" {
			p.refuseWord(w, "the variable name of [[ "+name+" ]], whose subscript bash evaluates", "[[")
			name = ""
			continue
		}
		words = append(words, w)
	}
	if arith {
		p.refuseRange(u0, len(p.res.uses), "an operand of an arithmetic comparison (-eq, -lt, …) in [[ ]], which bash evaluates as arithmetic", "[[")
		return
	}
	for _, w := range words {
		p.classify(w, useWord, "[[", false)
	}
}

// specialVars are variables that bash (or the dynamic loader, or bash
// started as a child) reads as more than data: arithmetic (RANDOM,
// OPTIND, ...), code (PS4, BASH_ENV, PROMPT_COMMAND), program lookup
// (PATH) or word splitting (IFS). Assigning a placeholder to them is
// refused, as are names with the prefixes in specialPrefixes.
var specialVars = map[string]bool{
	"PATH": true, "IFS": true, "ENV": true, "PS0": true, "PS1": true, "PS2": true, "PS3": true, "PS4": true,
	"PROMPT_COMMAND": true, "RANDOM": true, "SRANDOM": true, "SECONDS": true, "LINENO": true,
	"OPTIND": true, "OPTERR": true, "OPTARG": true, "HISTCMD": true, "CDPATH": true, "GLOBIGNORE": true,
	"FUNCNEST": true, "TMOUT": true, "SHELLOPTS": true, "POSIXLY_CORRECT": true, "EXECIGNORE": true,
	"FIGNORE": true, "HOSTFILE": true, "INPUTRC": true, "MAILPATH": true, "MAILCHECK": true, "MAIL": true,
	"COLUMNS": true, "LINES": true, "TIMEFORMAT": true, "EPOCHSECONDS": true, "EPOCHREALTIME": true,
	"DIRSTACK": true, "FUNCNAME": true, "GROUPS": true, "PIPESTATUS": true, "PPID": true, "UID": true,
	"EUID": true, "SHLVL": true, "REPLY": true, "MAPFILE": true, "COPROC": true, "IGNOREEOF": true,
	"PROMPT_DIRTRIM": true, "HOME": true, "PWD": true, "OLDPWD": true, "SHELL": true,
}

var specialPrefixes = []string{"BASH", "LD_", "DYLD_", "COMP_", "COMPREPLY", "HIST", "READLINE_", "CMD_"}

func specialVar(name string) bool {
	if specialVars[name] {
		return true
	}
	for _, pre := range specialPrefixes {
		if strings.HasPrefix(name, pre) {
			return true
		}
	}
	return false
}

// parseCommand runs the parser over cmd.
func parseCommand(cmd string, ref func(string) string) rewritten {
	res := rewritten{attributed: map[string]bool{}}
	p := &parser{src: cmd, ref: ref, res: &res}
	for p.i < len(p.src) {
		before := p.i
		p.list(0)
		if p.i < len(p.src) { // a stray ) or `: copy it and go on
			p.copyN(1)
		}
		if p.i == before {
			break
		}
	}
	for k := range res.uses {
		u := &res.uses[k]
		if u.kind == useUnknown {
			u.kind, u.why = useRefused, "a position utcpd does not recognise as data"
		}
		if u.kind == useArg && u.cmd == "" {
			u.kind, u.why = useRefused, "a position utcpd does not recognise as data"
		}
	}
	res.text = p.out.String()
	return res
}

// describe says where a refused use stands, for error messages.
func (u *use) describe() string {
	if u.cmd != "" {
		return fmt.Sprintf("%s (command %s)", u.why, u.cmd)
	}
	return u.why
}
