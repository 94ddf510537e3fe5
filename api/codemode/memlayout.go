package codemode

import (
	"reflect"
	"strconv"
	"unsafe"

	lua "github.com/yuin/gopher-lua"
)

// gopher-lua allocates maps with room for 32 entries the first time a
// table gets a string key, so a table's real size cannot be read from
// its entries: a one-field table takes about 2.8 KB. The sizer reads the
// real capacities: slices' cap, and the slot count of Go's swiss-table
// maps. Both rely on layouts outside this package, so both are checked
// when the package loads (tableLayoutOK, swissOK); a failed check
// falls back to a conservative model, never to a wrong read.

var tableLayoutOK = checkTableLayout()

func checkTableLayout() bool {
	real, mine := reflect.TypeFor[lua.LTable](), reflect.TypeFor[ltable]()
	if real.Size() != mine.Size() || real.NumField() != mine.NumField() {
		return false
	}
	for i := range real.NumField() {
		a, b := real.Field(i), mine.Field(i)
		if a.Name != b.Name || a.Type != b.Type || a.Offset != b.Offset {
			return false
		}
	}
	return true
}

// swissMap and swissTable mirror the head of Go's internal/runtime/maps
// Map and table (Go 1.24 to 1.26).
type swissMap struct {
	used   uint64
	seed   uintptr
	dirPtr unsafe.Pointer
	dirLen int
}

type swissTable struct {
	_        uint16 // used
	capacity uint16
}

var swissOK = checkSwiss()

// mapSlots is the slot count of the map stored at p (a pointer to a map
// variable) holding n entries. Without a verified layout it assumes the
// worst gopher-lua does: room for 32 entries, or n at a load of 1/2.
func mapSlots(p unsafe.Pointer, n int) int {
	mp := *(*unsafe.Pointer)(p)
	if mp == nil {
		return 0
	}
	if !swissOK {
		return max(64, 2*n)
	}
	return swissSlots(mp)
}

func swissSlots(mp unsafe.Pointer) int {
	m := (*swissMap)(mp)
	if m.dirLen == 0 {
		return 8 // one group
	}
	dir := unsafe.Slice((**swissTable)(m.dirPtr), m.dirLen)
	total := 0
	var prev *swissTable
	for _, t := range dir {
		if t != prev { // a table spans consecutive directory entries
			total += int(t.capacity)
			prev = t
		}
	}
	return total
}

// checkSwiss builds maps whose slot counts Go's map design fixes and
// compares them with what swissSlots reads.
func checkSwiss() bool {
	slots := func(m map[string]lua.LValue) int { return swissSlots(*(*unsafe.Pointer)(unsafe.Pointer(&m))) }
	small := map[string]lua.LValue{"a": lua.LTrue}
	if slots(small) != 8 {
		return false
	}
	// A hint of 32 entries asks for 32·8/7 slots, rounded up to a power
	// of two: 64.
	if slots(make(map[string]lua.LValue, 32)) != 64 {
		return false
	}
	big := make(map[string]lua.LValue)
	for i := range 5000 {
		big[strconv.Itoa(i)] = lua.LTrue
	}
	n := slots(big)
	return n >= 5000 && n <= 4*5000
}
