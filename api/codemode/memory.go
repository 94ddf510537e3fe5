package codemode

import (
	"fmt"
	"runtime/metrics"
	"unsafe"

	lua "github.com/yuin/gopher-lua"
)

// The memory estimate's model, in bytes. The figures were measured
// against gopher-lua v1.1.2 on Go 1.26 (TestMemoryModelCalibrated prints
// and checks them): a table is its struct plus the real capacity of its
// array part, its key list and its three Go maps (read from the table
// itself, see tableCost); a value stored in a table or upvalue adds what
// its interface boxing allocates.
const (
	// allocCheckEvery is how many VM instructions pass between two looks
	// at the process's allocation counter (about 0.4 µs each).
	allocCheckEvery = 1024
	// minWalkGap is the fewest instructions between two walks that the
	// allocation counter asks for; a walk that visited more objects
	// waits as many instructions, so walks cost at most about one object
	// visit per instruction.
	minWalkGap = 4096

	sizeTableStruct = 96 // lua.LTable (88 B, size class 96)
	sizeSlot        = 16 // one lua.LValue (interface) in a slice
	// Go swiss maps: per slot key + value, plus one control byte, plus
	// about a fifth for size-class and page rounding of the groups.
	slotStrDict = (16 + 16 + 1) * 6 / 5 // map[string]lua.LValue
	slotDict    = (16 + 16 + 1) * 6 / 5 // map[lua.LValue]lua.LValue
	slotK2I     = (16 + 8 + 1) * 6 / 5  // map[lua.LValue]int
	sizeMapHdr  = 48                    // maps.Map
	sizeMapTab  = 48                    // one maps.table of a large map
	sizeBoxed   = 24                    // a number boxed in an interface (measured: 8 B plus the allocator's chunking)
	sizeString  = 16                    // a string header boxed in an interface
	sizeFunc    = 64                    // lua.LFunction (56 B)
	sizeUpvalue = 48                    // lua.Upvalue
	sizeOther   = 32                    // userdata and anything else
	// sizeTable and sizeEntry are what a charge for a table built by
	// Go code (json.decode, tool results) uses: an upper bound of the
	// struct and of one string-keyed entry (map slot at the lowest load,
	// key list, key index, boxed key).
	sizeTable = sizeTableStruct + sizeMapHdr
	sizeEntry = 2*slotStrDict + sizeSlot + sizeString + 2*slotK2I
	// dedupString is the length from which strings are counted once
	// per backing array (Go strings share memory).
	dedupString = 64
)

// charge accounts n bytes a library function or operator is about to
// build. When the charges since the last walk would pass the limit it
// walks first; it kills the run and raises when the estimate plus n is
// above the limit, or when all runs together would pass the Runner's
// MaxTotalMemory.
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
	if !rn.account() {
		L.RaiseError("%s", rn.killMsg)
	}
}

// hold checks that held bytes, which Go code keeps where no walk can see
// them (gsub's result being built), fit beside the estimate; it raises
// like charge when they do not.
func (rn *run) hold(L *lua.LState, held int64) {
	if rn.memEst+rn.fresh+held <= rn.memLimit {
		return
	}
	if !rn.walk() || rn.memEst+held > rn.memLimit {
		rn.kill(killMemory, fmt.Sprintf("the program would use more than %d bytes of memory (estimate; a result of %d bytes being built)", rn.memLimit, held))
		L.RaiseError("%s", rn.killMsg)
	}
}

// account publishes the run's estimate to the Runner's total of all
// runs; it kills the run (and reports false) when its growth takes the
// total over MaxTotalMemory.
func (rn *run) account() bool {
	cur := rn.memEst + rn.fresh
	d := cur - rn.reported
	if d == 0 {
		return true
	}
	rn.reported = cur
	total := rn.r.total.Add(d)
	if d > 0 && total > rn.r.opts.MaxTotalMemory {
		rn.kill(killMemory, fmt.Sprintf("all CodeMode runs together would use more than %d bytes of memory (estimate; this run holds %d)", rn.r.opts.MaxTotalMemory, cur))
		return false
	}
	return true
}

// release takes the run's share out of the Runner's total.
func (rn *run) release() {
	rn.r.total.Add(-rn.reported)
	rn.reported = 0
}

// walk measures the reachable data and resets the charges. It reports
// false (and kills the run) when the estimate is above the limit.
func (rn *run) walk() bool {
	est, objects, over := rn.estimate(rn.L)
	rn.memEst, rn.fresh = est, 0
	rn.allocsAtWalk = processAllocs()
	rn.hook.nextWalk = rn.hook.steps + max(minWalkGap, objects)
	if over {
		rn.kill(killMemory, fmt.Sprintf("the program uses more than %d bytes of memory (estimate)", rn.memLimit))
		return false
	}
	return rn.account()
}

// needWalk reports whether the process allocated, since the last walk,
// more than the run's headroom: only then can the live data have passed
// the limit (growth needs allocation; other goroutines' allocations
// count too, so the check errs on the early side).
func (rn *run) needWalk() bool {
	headroom := rn.memLimit - rn.memEst - rn.fresh
	if left := rn.r.opts.MaxTotalMemory - rn.r.total.Load(); left < headroom {
		headroom = left
	}
	return processAllocs()-rn.allocsAtWalk >= uint64(max(headroom, 0))
}

var allocsSample = "/gc/heap/allocs:bytes"

// processAllocs is the process's cumulative heap allocation in bytes.
func processAllocs() uint64 {
	s := [1]metrics.Sample{{Name: allocsSample}}
	metrics.Read(s[:])
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// estimate sums the sizes of the values reachable from the globals, the
// registry and the locals of every active frame (following tables,
// metatables and closures' upvalues), stopping once above the limit. It
// also returns how many objects it visited.
func (rn *run) estimate(L *lua.LState) (int64, int64, bool) {
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
	return s.total, s.objects, s.total > s.limit
}

// sizer walks values with an explicit stack (no recursion).
type sizer struct {
	tables  map[*lua.LTable]struct{}
	funcs   map[*lua.LFunction]struct{}
	strs    map[*byte]struct{}
	stack   []lua.LValue
	total   int64
	objects int64
	limit   int64
}

// push counts a value held in a slot (table entry, upvalue, local): a
// boxed number or string header, and queues objects for drain.
func (s *sizer) push(v lua.LValue) {
	switch x := v.(type) {
	case nil:
	case lua.LString:
		s.total += sizeString
		s.addData(string(x))
	case lua.LNumber:
		if x < 0 || x >= 128 || x != lua.LNumber(int64(x)) {
			s.total += sizeBoxed // 0..127 are preallocated by gopher-lua
		}
	case lua.LBool, *lua.LNilType:
	default:
		s.stack = append(s.stack, v)
	}
}

// addData counts a string's bytes (rounded to 8), once per backing
// array from dedupString bytes on.
func (s *sizer) addData(x string) {
	if len(x) >= dedupString {
		p := unsafe.StringData(x)
		if _, seen := s.strs[p]; seen {
			return
		}
		s.strs[p] = struct{}{}
	}
	s.total += int64(len(x)+7) &^ 7
}

func (s *sizer) drain() {
	for len(s.stack) > 0 && s.total <= s.limit {
		v := s.stack[len(s.stack)-1]
		s.stack = s.stack[:len(s.stack)-1]
		s.objects++
		switch x := v.(type) {
		case *lua.LTable:
			if _, seen := s.tables[x]; seen {
				continue
			}
			s.tables[x] = struct{}{}
			s.table(x)
		case *lua.LFunction:
			if _, seen := s.funcs[x]; seen {
				continue
			}
			s.funcs[x] = struct{}{}
			s.total += sizeFunc + int64(cap(x.Upvalues))*8
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

// table counts t and queues its contents.
func (s *sizer) table(t *lua.LTable) {
	if !tableLayoutOK {
		// Unknown layout: a conservative model from the entries alone.
		s.total += sizeTable
		t.ForEach(func(k, v lua.LValue) {
			s.total += sizeEntry
			s.push(k)
			s.push(v)
		})
		s.push(t.Metatable)
		return
	}
	m := (*ltable)(unsafe.Pointer(t))
	s.total += tableCost(m)
	for _, v := range m.array {
		if v != lua.LNil {
			s.push(v)
		}
	}
	for k, v := range m.strdict {
		s.addData(k) // the key's header lives in the map slot
		s.push(v)
	}
	for k, v := range m.dict {
		s.push(k)
		s.push(v)
	}
	// The key list and the key index box every hash key twice more
	// (their string data is shared with the map's key).
	s.total += int64(len(m.keys)) * 2 * sizeString
	s.push(m.Metatable)
}

// tableCost is the memory of a table's own structures, from their real
// capacities.
func tableCost(m *ltable) int64 {
	c := int64(sizeTableStruct)
	c += int64(cap(m.array)+cap(m.keys)) * sizeSlot
	c += mapCost(mapSlots(unsafe.Pointer(&m.strdict), len(m.strdict)), slotStrDict)
	c += mapCost(mapSlots(unsafe.Pointer(&m.dict), len(m.dict)), slotDict)
	c += mapCost(mapSlots(unsafe.Pointer(&m.k2i), len(m.k2i)), slotK2I)
	return c
}

func mapCost(slots int, perSlot int64) int64 {
	if slots == 0 {
		return 0
	}
	tables := int64(slots/1024) + 1
	return sizeMapHdr + int64(slots)*perSlot + tables*sizeMapTab
}

// ltable mirrors lua.LTable's fields (gopher-lua v1.1.2); tableLayoutOK
// says the mirror matches the real type, checked with reflection when
// the package loads. Without it the sizer falls back to a model from
// the entries.
type ltable struct {
	Metatable lua.LValue
	array     []lua.LValue
	dict      map[lua.LValue]lua.LValue
	strdict   map[string]lua.LValue
	keys      []lua.LValue
	k2i       map[lua.LValue]int
}
