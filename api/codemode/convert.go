package codemode

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/utcp"
)

// maxDepth bounds the nesting of values converted between Lua and JSON.
const maxDepth = 100

// maxLoggedArgs is the largest arguments JSON kept in a ToolCall.
const maxLoggedArgs = 2 << 10

func itoa(n int) string { return strconv.Itoa(n) }

// toGo converts a Lua value to a JSON-ready Go value:
//
//   - nil and json.null → nil; booleans and strings as they are;
//   - a number → int64 when integral and within ±2^53, else float64 (NaN
//     and ±Inf are errors);
//   - a table whose keys are exactly 1..n (n ≥ 1) → an array; any other
//     table → an object (number keys written as strings; an empty table
//     is {});
//   - functions, userdata and cyclic or too deeply nested tables are
//     errors.
func (rn *run) toGo(v lua.LValue, depth int) (any, error) {
	if depth == 0 {
		rn.nodes = rn.memLimit / sizeEntry
	}
	if depth > maxDepth {
		return nil, fmt.Errorf("nested more than %d levels (or cyclic)", maxDepth)
	}
	if rn.nodes--; rn.nodes < 0 {
		return nil, errors.New("the value is too large (shared subtables count once per reference)")
	}
	switch x := v.(type) {
	case *lua.LNilType:
		return nil, nil
	case lua.LBool:
		return bool(x), nil
	case lua.LString:
		return string(x), nil
	case lua.LNumber:
		f := float64(x)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("the number %v has no JSON form", f)
		}
		if f == math.Trunc(f) && math.Abs(f) <= 1<<53 {
			return int64(f), nil
		}
		return f, nil
	case *lua.LUserData:
		if x == rn.null {
			return nil, nil
		}
		return nil, errors.New("a userdata value has no JSON form")
	case *lua.LTable:
		count, array := 0, true
		x.ForEach(func(k, _ lua.LValue) {
			count++
			if n, ok := k.(lua.LNumber); !ok || float64(n) != math.Trunc(float64(n)) || n < 1 {
				array = false
			}
		})
		if array && count > 0 {
			// Integral keys ≥ 1, count of them: array iff all ≤ count.
			arr := make([]any, count)
			for i := 1; i <= count; i++ {
				ev := x.RawGetInt(i)
				if ev == lua.LNil {
					array = false
					break
				}
				var err error
				if arr[i-1], err = rn.toGo(ev, depth+1); err != nil {
					return nil, err
				}
			}
			if array {
				return arr, nil
			}
		}
		obj := make(map[string]any, count)
		var err error
		x.ForEach(func(k, ev lua.LValue) {
			if err != nil {
				return
			}
			var key string
			switch kk := k.(type) {
			case lua.LString:
				key = string(kk)
			case lua.LNumber:
				key = kk.String()
			default:
				err = fmt.Errorf("a table key of type %s has no JSON form", k.Type())
				return
			}
			obj[key], err = rn.toGo(ev, depth+1)
		})
		if err != nil {
			return nil, err
		}
		return obj, nil
	default:
		return nil, fmt.Errorf("a %s value has no JSON form", v.Type())
	}
}

// toLua converts a JSON-like Go value to Lua, charging its size: JSON
// null → nil, numbers → numbers, arrays → tables 1..n, objects → tables.
// A json.RawMessage is decoded first; other Go types go through JSON.
func (rn *run) toLua(L *lua.LState, v any, depth int) lua.LValue {
	if depth > maxDepth {
		L.RaiseError("a value is nested more than %d levels", maxDepth)
	}
	switch x := v.(type) {
	case nil:
		return lua.LNil
	case bool:
		return lua.LBool(x)
	case string:
		rn.charge(L, int64(len(x))+sizeString)
		return lua.LString(x)
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return lua.LString(x)
		}
		return lua.LNumber(f)
	case float64:
		return lua.LNumber(x)
	case float32:
		return lua.LNumber(x)
	case int:
		return lua.LNumber(x)
	case int64:
		return lua.LNumber(x)
	case int32:
		return lua.LNumber(x)
	case uint64:
		return lua.LNumber(x)
	case []any:
		rn.charge(L, sizeTable+int64(len(x))*sizeEntry)
		t := L.CreateTable(len(x), 0)
		for i, e := range x {
			t.RawSetInt(i+1, rn.toLua(L, e, depth+1))
		}
		return t
	case map[string]any:
		rn.charge(L, sizeTable+int64(len(x))*sizeEntry)
		t := L.CreateTable(0, len(x))
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			t.RawSetString(k, rn.toLua(L, x[k], depth+1))
		}
		return t
	case json.RawMessage:
		return rn.toLua(L, decodeJSON(L, rn, x), depth)
	default:
		raw, err := json.Marshal(x)
		if err != nil {
			L.RaiseError("a value of type %T cannot be converted: %v", v, err)
		}
		return rn.toLua(L, decodeJSON(L, rn, raw), depth)
	}
}

// decodeJSON decodes raw (numbers as json.Number), raising on bad JSON.
func decodeJSON(L *lua.LState, rn *run, raw []byte) any {
	rn.charge(L, int64(len(raw)))
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var out any
	if err := dec.Decode(&out); err != nil {
		L.RaiseError("invalid JSON: %v", err)
	}
	if dec.More() {
		L.RaiseError("invalid JSON: data after the value")
	}
	return out
}

// jsonEncode is json.encode(value) → string.
func jsonEncode(L *lua.LState) int {
	rn := runOf(L)
	v, err := rn.toGo(L.CheckAny(1), 0)
	if err != nil {
		L.ArgError(1, err.Error())
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		L.ArgError(1, err.Error())
	}
	out := bytes.TrimSuffix(b.Bytes(), []byte("\n"))
	rn.charge(L, int64(len(out)))
	L.Push(lua.LString(out))
	return 1
}

// jsonDecode is json.decode(string) → value.
func jsonDecode(L *lua.LState) int {
	rn := runOf(L)
	s := L.CheckString(1)
	L.Push(rn.toLua(L, decodeJSON(L, rn, []byte(s)), 0))
	return 1
}

// callTool is call_tool(name, args): one gateway call, counted against
// the run's budget.
func callTool(L *lua.LState) int {
	rn := runOf(L)
	name := L.CheckString(1)
	var args map[string]any
	switch a := L.Get(2).(type) {
	case *lua.LNilType:
	case *lua.LTable:
		v, err := rn.toGo(a, 0)
		if err != nil {
			L.ArgError(2, "arguments: "+err.Error())
		}
		m, ok := v.(map[string]any)
		if !ok {
			L.ArgError(2, "arguments must be a table with string keys (a JSON object), not a list")
		}
		args = m
	default:
		L.TypeError(2, lua.LTTable)
	}
	if rn.nCalls >= rn.maxCalls {
		rn.kill(killToolCalls, fmt.Sprintf("the program made more than %d tool calls", rn.maxCalls))
		L.RaiseError("%s", rn.killMsg)
	}
	rn.nCalls++
	rec := ToolCall{Tool: name}
	if raw, err := json.Marshal(args); err == nil && len(raw) <= maxLoggedArgs {
		rec.Arguments = args
	} else {
		rec.ArgumentsOmitted = true
	}
	start := time.Now()
	res, err := rn.r.opts.Tools.CallTool(rn.ctx, name, args, gateway.CallOptions{
		Principal: rn.caller.Principal, Front: FrontName, Timeout: min(rn.r.opts.CallTimeout, max(rn.remaining(), time.Millisecond)),
	})
	rec.DurationMS = float64(time.Since(start).Microseconds()) / 1000
	if err != nil {
		rec.Code = codeOf(err)
		rn.record(rec)
		rn.raiseToolError(L, name, err)
	}
	rec.OK = true
	rn.record(rec)
	if res == nil {
		L.Push(lua.LNil)
		return 1
	}
	L.Push(rn.toLua(L, res.Value, 0))
	return 1
}

// raiseToolError raises {code, message, tool, value} with a __tostring.
func (rn *run) raiseToolError(L *lua.LState, tool string, err error) {
	t := L.CreateTable(0, 4)
	t.RawSetString("code", lua.LString(codeOf(err)))
	t.RawSetString("message", lua.LString(err.Error()))
	t.RawSetString("tool", lua.LString(tool))
	var te *utcp.ToolError
	if errors.As(err, &te) && te.Value != nil {
		t.RawSetString("value", rn.toLua(L, te.Value, 0))
	}
	t.Metatable = rn.toolErrMt
	L.Error(t, 1)
}

// toolErrText renders a call_tool error table.
func toolErrText(t *lua.LTable) string {
	return fmt.Sprintf("call_tool(%s): %s: %s", lua.LVAsString(t.RawGetString("tool")),
		lua.LVAsString(t.RawGetString("code")), lua.LVAsString(t.RawGetString("message")))
}

// searchTools is search_tools(query, limit) → a list of {name,
// description, tags, inputs, outputs}.
func searchTools(L *lua.LState) int {
	rn := runOf(L)
	q := L.OptString(1, "")
	limit := L.OptInt(2, 10)
	tools := rn.r.opts.Tools.SearchTools(rn.ctx, q, limit, nil)
	out := L.CreateTable(len(tools), 0)
	for i, t := range tools {
		e := L.CreateTable(0, 5)
		e.RawSetString("name", lua.LString(t.Name))
		e.RawSetString("description", lua.LString(t.Description))
		tags := L.CreateTable(len(t.Tags), 0)
		for j, tag := range t.Tags {
			tags.RawSetInt(j+1, lua.LString(tag))
		}
		e.RawSetString("tags", tags)
		if len(t.Inputs) > 0 {
			e.RawSetString("inputs", rn.toLua(L, t.Inputs, 0))
		}
		if len(t.Outputs) > 0 {
			e.RawSetString("outputs", rn.toLua(L, t.Outputs, 0))
		}
		out.RawSetInt(i+1, e)
	}
	L.Push(out)
	return 1
}

// listTools is list_tools() → a list of qualified names.
func listTools(L *lua.LState) int {
	rn := runOf(L)
	tools := rn.r.opts.Tools.ListTools(rn.ctx)
	rn.charge(L, sizeTable+int64(len(tools))*(sizeEntry+sizeString+32))
	out := L.CreateTable(len(tools), 0)
	for i, t := range tools {
		out.RawSetInt(i+1, lua.LString(t.Name))
	}
	L.Push(out)
	return 1
}
