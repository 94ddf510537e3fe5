package codemode

import (
	"container/list"
	"errors"
	"fmt"
	"strings"
	"sync"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/ast"
	"github.com/yuin/gopher-lua/parse"
)

// chunkName is the program's name in error messages ("codemode:3: ...").
const chunkName = "codemode"

// catName is the hidden local holding the checked concatenation; it is
// not a valid Lua identifier, so no program can name it.
const catName = "\x00cat"

// compile parses code, rewrites every ".." into a call of the checked
// concatenation, and compiles the result. The compiled chunk is
//
//	local <cat> = ...
//	return (function(...) <code> end)()
//
// so the program's own "..." is empty and its return values are the
// chunk's.
func compile(code string) (*lua.FunctionProto, *Error) {
	chunk, err := parse.Parse(strings.NewReader(code), chunkName)
	if err != nil {
		return nil, &Error{Stage: StageCompile, Type: SyntaxError, Message: syntaxMessage(err), Logs: []string{}}
	}
	w := rewriter{}
	w.stmts(chunk, 0)
	if w.err != nil {
		return nil, &Error{Stage: StageCompile, Type: SyntaxError, Message: w.err.Error(), Logs: []string{}}
	}
	body := &ast.FunctionExpr{ParList: &ast.ParList{HasVargs: true}, Stmts: chunk}
	call := &ast.FuncCallExpr{Func: body, AdjustRet: false}
	local := &ast.LocalAssignStmt{Names: []string{catName}, Exprs: []ast.Expr{&ast.Comma3Expr{AdjustRet: true}}}
	ret := &ast.ReturnStmt{Exprs: []ast.Expr{call}}
	proto, err := lua.Compile([]ast.Stmt{local, ret}, chunkName)
	if err != nil {
		return nil, &Error{Stage: StageCompile, Type: SyntaxError, Message: err.Error(), Logs: []string{}}
	}
	return proto, nil
}

func syntaxMessage(err error) string {
	var pe *parse.Error
	if errors.As(err, &pe) {
		if pe.Pos.Line < 1 {
			return fmt.Sprintf("%s: %s at the end of the program", chunkName, pe.Message)
		}
		return fmt.Sprintf("%s:%d:%d: %s near %q", chunkName, pe.Pos.Line, pe.Pos.Column, pe.Message, pe.Token)
	}
	return err.Error()
}

// rewriter replaces concatenations and bounds nesting.
type rewriter struct{ err error }

func (w *rewriter) deep(depth int, n ast.PositionHolder) bool {
	if depth > MaxNesting && w.err == nil {
		w.err = fmt.Errorf("%s:%d: the program is nested more than %d levels deep", chunkName, n.Line(), MaxNesting)
	}
	return w.err != nil
}

func (w *rewriter) stmts(list []ast.Stmt, depth int) {
	for _, s := range list {
		w.stmt(s, depth)
	}
}

func (w *rewriter) exprs(list []ast.Expr, depth int) {
	for i := range list {
		list[i] = w.expr(list[i], depth)
	}
}

func (w *rewriter) stmt(s ast.Stmt, depth int) {
	if s == nil || w.deep(depth, s) {
		return
	}
	d := depth + 1
	switch x := s.(type) {
	case *ast.AssignStmt:
		w.exprs(x.Lhs, d)
		w.exprs(x.Rhs, d)
	case *ast.LocalAssignStmt:
		w.exprs(x.Exprs, d)
	case *ast.FuncCallStmt:
		x.Expr = w.expr(x.Expr, d)
	case *ast.DoBlockStmt:
		w.stmts(x.Stmts, d)
	case *ast.WhileStmt:
		x.Condition = w.expr(x.Condition, d)
		w.stmts(x.Stmts, d)
	case *ast.RepeatStmt:
		x.Condition = w.expr(x.Condition, d)
		w.stmts(x.Stmts, d)
	case *ast.IfStmt:
		x.Condition = w.expr(x.Condition, d)
		w.stmts(x.Then, d)
		w.stmts(x.Else, d)
	case *ast.NumberForStmt:
		x.Init = w.expr(x.Init, d)
		x.Limit = w.expr(x.Limit, d)
		x.Step = w.expr(x.Step, d)
		w.stmts(x.Stmts, d)
	case *ast.GenericForStmt:
		w.exprs(x.Exprs, d)
		w.stmts(x.Stmts, d)
	case *ast.FuncDefStmt:
		if x.Name != nil {
			x.Name.Func = w.expr(x.Name.Func, d)
			x.Name.Receiver = w.expr(x.Name.Receiver, d)
		}
		if x.Func != nil {
			w.stmts(x.Func.Stmts, d)
		}
	case *ast.ReturnStmt:
		w.exprs(x.Exprs, d)
	}
}

func (w *rewriter) expr(e ast.Expr, depth int) ast.Expr {
	if e == nil || w.deep(depth, e) {
		return e
	}
	d := depth + 1
	switch x := e.(type) {
	case *ast.StringConcatOpExpr:
		call := &ast.FuncCallExpr{
			Func:      &ast.IdentExpr{Value: catName},
			Args:      []ast.Expr{w.expr(x.Lhs, d), w.expr(x.Rhs, d)},
			AdjustRet: true,
		}
		call.SetLine(x.Line())
		call.SetLastLine(x.LastLine())
		call.Func.SetLine(x.Line())
		call.Func.SetLastLine(x.LastLine())
		return call
	case *ast.AttrGetExpr:
		x.Object = w.expr(x.Object, d)
		x.Key = w.expr(x.Key, d)
	case *ast.TableExpr:
		for _, f := range x.Fields {
			f.Key = w.expr(f.Key, d)
			f.Value = w.expr(f.Value, d)
		}
	case *ast.FuncCallExpr:
		x.Func = w.expr(x.Func, d)
		x.Receiver = w.expr(x.Receiver, d)
		w.exprs(x.Args, d)
	case *ast.LogicalOpExpr:
		x.Lhs = w.expr(x.Lhs, d)
		x.Rhs = w.expr(x.Rhs, d)
	case *ast.RelationalOpExpr:
		x.Lhs = w.expr(x.Lhs, d)
		x.Rhs = w.expr(x.Rhs, d)
	case *ast.ArithmeticOpExpr:
		x.Lhs = w.expr(x.Lhs, d)
		x.Rhs = w.expr(x.Rhs, d)
	case *ast.UnaryMinusOpExpr:
		x.Expr = w.expr(x.Expr, d)
	case *ast.UnaryNotOpExpr:
		x.Expr = w.expr(x.Expr, d)
	case *ast.UnaryLenOpExpr:
		x.Expr = w.expr(x.Expr, d)
	case *ast.FunctionExpr:
		w.stmts(x.Stmts, d)
	}
	return e
}

// Bounds of a Runner's cache of compiled programs.
const (
	cacheEntries = 256
	cacheBytes   = 4 << 20
)

// protoCache keeps the compiled form of recently run programs, keyed by
// source, least recently used out first. A FunctionProto is read-only
// once compiled (gopher-lua never writes to it while running), so runs
// share it; everything a run can change lives in its own state.
type protoCache struct {
	mu    sync.Mutex
	ll    *list.List // of *cacheEntry, most recent first
	m     map[string]*list.Element
	bytes int
}

type cacheEntry struct {
	code  string
	proto *lua.FunctionProto
}

func (c *protoCache) get(code string) (*lua.FunctionProto, *Error) {
	c.mu.Lock()
	if el, ok := c.m[code]; ok {
		c.ll.MoveToFront(el)
		p := el.Value.(*cacheEntry).proto
		c.mu.Unlock()
		return p, nil
	}
	c.mu.Unlock()
	p, err := compile(code)
	if err != nil || len(code) > cacheBytes/16 {
		return p, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m, c.ll = map[string]*list.Element{}, list.New()
	}
	if _, ok := c.m[code]; !ok {
		c.m[code] = c.ll.PushFront(&cacheEntry{code, p})
		c.bytes += len(code)
		for c.ll.Len() > cacheEntries || c.bytes > cacheBytes {
			old := c.ll.Remove(c.ll.Back()).(*cacheEntry)
			delete(c.m, old.code)
			c.bytes -= len(old.code)
		}
	}
	return p, nil
}
