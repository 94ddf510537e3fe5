package codemode

import (
	"fmt"
	"unsafe"

	lua "github.com/yuin/gopher-lua"
)

// The memory estimate's model, in bytes.
const (
	// walkInterval is the fewest instructions between two scheduled
	// walks.
	walkInterval = 16384
	// growthPerInstruction bounds what one VM instruction can add that
	// is not charged (a table slot, an empty table): the next walk is
	// scheduled before such growth could pass the limit.
	growthPerInstruction = 64
	sizeString           = 16
	sizeTable            = 64
	sizeEntry            = 48
	sizeFunction         = 64
	sizeUpvalue          = 16
	sizeOther            = 16
	// dedupString is the length from which strings are counted once
	// per backing array (Go strings share memory).
	dedupString = 64
)

// charge accounts n bytes a library function or operator is about to
// build. When the charges since the last walk would pass the limit it
// walks first; it kills the run and raises when the estimate plus n is
// above the limit.
func (rn *run) charge(L *lua.LState, n int64) {
	if n < 0 {
		n = rn.memLimit + 1
	}
	if rn.memEst+rn.fresh+n > rn.memLimit {
		if n > rn.memLimit || !rn.walk() || rn.memEst+n > rn.memLimit {
			rn.kill(killMemory, fmt.Sprintf("the program would use more than %d bytes of memory (estimate; building a value of %d bytes)", rn.memLimit, n))
			L.RaiseError("%s", rn.killMsg)
		}
	}
	rn.fresh += n
}

// walk measures the reachable data, resets the charges and schedules the
// next walk. It reports false (and kills the run) when the estimate is
// above the limit.
func (rn *run) walk() bool {
	est, over := rn.estimate(rn.L)
	rn.memEst, rn.fresh = est, 0
	h := rn.hook
	h.nextWalk = h.steps + max(walkInterval, (rn.memLimit-est)/growthPerInstruction)
	if over {
		rn.kill(killMemory, fmt.Sprintf("the program uses more than %d bytes of memory (estimate)", rn.memLimit))
		return false
	}
	return true
}

// estimate sums the sizes of the values reachable from the globals, the
// registry and the locals of every active frame (following tables,
// metatables and closures' upvalues), stopping once above the limit.
func (rn *run) estimate(L *lua.LState) (int64, bool) {
	s := sizer{
		tables: map[*lua.LTable]struct{}{},
		funcs:  map[*lua.LFunction]struct{}{},
		strs:   map[*byte]struct{}{},
		limit:  rn.memLimit,
	}
	s.push(L.G.Global)
	s.push(L.G.Registry)
	for level := 0; ; level++ {
		dbg, ok := L.GetStack(level)
		if !ok {
			break
		}
		for n := 1; ; n++ {
			name, v := L.GetLocal(dbg, n)
			if name == "" {
				break
			}
			s.push(v)
		}
	}
	s.drain()
	return s.total, s.total > s.limit
}

// sizer walks values with an explicit stack (no recursion).
type sizer struct {
	tables map[*lua.LTable]struct{}
	funcs  map[*lua.LFunction]struct{}
	strs   map[*byte]struct{}
	stack  []lua.LValue
	total  int64
	limit  int64
}

func (s *sizer) push(v lua.LValue) {
	switch x := v.(type) {
	case nil:
	case lua.LString:
		s.addString(string(x))
	case lua.LNumber, lua.LBool, *lua.LNilType:
	default:
		s.stack = append(s.stack, v)
	}
}

func (s *sizer) addString(x string) {
	if len(x) >= dedupString {
		p := unsafe.StringData(x)
		if _, seen := s.strs[p]; seen {
			return
		}
		s.strs[p] = struct{}{}
	}
	s.total += sizeString + int64(len(x))
}

func (s *sizer) drain() {
	for len(s.stack) > 0 && s.total <= s.limit {
		v := s.stack[len(s.stack)-1]
		s.stack = s.stack[:len(s.stack)-1]
		switch x := v.(type) {
		case *lua.LTable:
			if _, seen := s.tables[x]; seen {
				continue
			}
			s.tables[x] = struct{}{}
			s.total += sizeTable
			x.ForEach(func(k, v lua.LValue) {
				s.total += sizeEntry
				s.push(k)
				s.push(v)
			})
			s.push(x.Metatable)
		case *lua.LFunction:
			if _, seen := s.funcs[x]; seen {
				continue
			}
			s.funcs[x] = struct{}{}
			s.total += sizeFunction
			for _, uv := range x.Upvalues {
				if uv != nil {
					s.total += sizeUpvalue
					s.push(uv.Value())
				}
			}
		case *lua.LUserData:
			s.total += sizeOther
			s.push(x.Metatable)
		default:
			s.total += sizeOther
		}
	}
}
