package openapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/utcpd/utcpd/internal/schematest"
	"github.com/utcpd/utcpd/utcp"
)

// tally counts the schemas checked and why the invalid ones are.
type tally struct {
	checked, invalid int
	meta, compile    int            // failing the meta-schema; failing to compile though passing it
	keywords         map[string]int // schemas using each keyword outside 2020-12
}

func (y tally) String() string {
	kw := make([]string, 0, len(y.keywords))
	for k, n := range y.keywords {
		kw = append(kw, fmt.Sprintf("%s %d", k, n))
	}
	slices.Sort(kw)
	if len(kw) == 0 {
		kw = []string{"none"}
	}
	return fmt.Sprintf("%d schemas checked, %d invalid (%d fail the 2020-12 meta-schema, %d more do not compile; schemas using non-2020-12 keywords: %s)",
		y.checked, y.invalid, y.meta, y.compile, strings.Join(kw, ", "))
}

// add checks one schema (named what, for the first errors reported) and
// counts it.
func (y *tally) add(t testing.TB, what string, raw []byte) {
	t.Helper()
	y.checked++
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	bad := false
	if err := schematest.Meta(doc); err != nil {
		y.meta++
		bad = true
		y.report(t, what, err)
	} else if err := schematest.Compile(doc); err != nil {
		y.compile++
		bad = true
		y.report(t, what, err)
	}
	if unknown := schematest.UnknownKeywords(doc); len(unknown) > 0 {
		if y.keywords == nil {
			y.keywords = map[string]int{}
		}
		for _, k := range unknown {
			y.keywords[k]++
		}
		if !bad {
			y.report(t, what, schematest.Unknown(doc, ""))
		}
		bad = true
	}
	if bad {
		y.invalid++
	}
}

// report fails t with the first few problems only.
func (y *tally) report(t testing.TB, what string, err error) {
	t.Helper()
	if y.invalid < 5 {
		msg := err.Error()
		if len(msg) > 600 {
			msg = msg[:600] + "…"
		}
		t.Errorf("%s: %s", what, msg)
	}
}

// checkSchemas checks the inputs and outputs of every tool.
func checkSchemas(t testing.TB, tools []utcp.Tool) tally {
	t.Helper()
	var y tally
	for _, tool := range tools {
		for _, s := range []struct {
			what string
			raw  json.RawMessage
		}{{"inputs", tool.Inputs}, {"outputs", tool.Outputs}} {
			if len(bytes.TrimSpace(s.raw)) == 0 {
				continue
			}
			y.add(t, tool.Name+" "+s.what, s.raw)
		}
	}
	return y
}
