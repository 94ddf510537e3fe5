package envelope

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/utcpd/utcpd/transports/transporttest/fixture"
)

// answers runs Answer and returns the frames it sent, as JSON text.
func answers(t *testing.T, ctx context.Context, req Frame) []string {
	t.Helper()
	var out []string
	Answer(ctx, fixture.New(), req, func(f Frame) error {
		b, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
		return nil
	})
	return out
}

// TestAnswer pins the frames each kind of call is answered with, as
// docs/transports.md describes them.
func TestAnswer(t *testing.T) {
	for _, c := range []struct {
		name string
		req  Frame
		want []string
	}{
		{"echo", Frame{Type: Call, ID: "1", Tool: "echo", Arguments: map[string]any{"s": "héllo"}},
			[]string{`{"type":"result","id":"1","result":{"s":"héllo"}}`}},
		{"add", Frame{Type: Call, ID: "2", Tool: "add", Arguments: map[string]any{"a": 1, "b": 2}},
			[]string{`{"type":"result","id":"2","result":{"sum":3}}`}},
		{"count streams events then end", Frame{Type: Call, ID: "3", Tool: "count", Arguments: map[string]any{"n": 3}},
			[]string{`{"type":"event","id":"3","data":1}`, `{"type":"event","id":"3","data":2}`, `{"type":"event","id":"3","data":3}`, `{"type":"end","id":"3"}`}},
		{"count of none is just end", Frame{Type: Call, ID: "4", Tool: "count", Arguments: map[string]any{"n": 0}},
			[]string{`{"type":"end","id":"4"}`}},
		{"fail is tool_error", Frame{Type: Call, ID: "5", Tool: "fail", Arguments: map[string]any{"message": "boom"}},
			[]string{`{"type":"error","id":"5","error":{"code":"tool_error","message":"boom"}}`}},
		{"unknown tool", Frame{Type: Call, ID: "6", Tool: "nope"},
			[]string{`{"type":"error","id":"6","error":{"code":"tool_not_found","message":"unknown tool: \"nope\""}}`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := answers(t, context.Background(), c.req)
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("answers:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
	got := answers(t, context.Background(), Frame{Type: Call, ID: "7", Tool: "add", Arguments: map[string]any{"a": "x"}})
	if len(got) != 1 || !strings.HasPrefix(got[0], `{"type":"error","id":"7","error":{"code":"invalid_arguments","message":`) {
		t.Errorf("add with a bad argument: %q, want one invalid_arguments error", got)
	}
}

// TestAnswerCancelled: a call whose caller went away gets no answer.
func TestAnswerCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tool := range []string{"sleep", "count"} {
		if got := answers(t, ctx, Frame{Type: Call, ID: "1", Tool: tool, Arguments: map[string]any{"ms": 60_000, "n": 5}}); len(got) != 0 {
			t.Errorf("%s after the caller went away answered %q", tool, got)
		}
	}
}

// TestAnswerSendFails: a stream whose event cannot be sent stops there.
func TestAnswerSendFails(t *testing.T) {
	sent := 0
	Answer(context.Background(), fixture.New(), Frame{Type: Call, ID: "1", Tool: "count", Arguments: map[string]any{"n": 5}}, func(f Frame) error {
		sent++
		if f.Type == Event {
			return context.Canceled // the connection is gone
		}
		return nil
	})
	if sent != 2 { // the failed event, then the error frame
		t.Errorf("%d frames attempted after the first event failed, want 2", sent)
	}
}

func TestDecode(t *testing.T) {
	f, err := Decode([]byte(`{"type":"call","id":"7","tool":"echo","arguments":{"a":[1,"x"]},"extra":true}`))
	if err != nil || f.Type != Call || f.ID != "7" || f.Tool != "echo" || len(f.Arguments) != 1 {
		t.Errorf("Decode(call) = %+v, %v", f, err)
	}
	for _, bad := range []string{``, `[1]`, `"call"`, `{"type":"call","id":7}`, `{"type":"call","id":"1","arguments":[1]}`, `{"type":`} {
		if f, err := Decode([]byte(bad)); err == nil {
			t.Errorf("Decode(%s) = %+v, want an error", bad, f)
		}
	}
}

// TestFrameJSON: a null result is sent as null, not left out; empty
// fields are absent.
func TestFrameJSON(t *testing.T) {
	for f, want := range map[*Frame]string{
		{Type: Result, ID: "1", Result: json.RawMessage("null")}: `{"type":"result","id":"1","result":null}`,
		{Type: End, ID: "2"}: `{"type":"end","id":"2"}`,
		ptr(ErrorFrame("", "invalid_request", "not JSON")): `{"type":"error","error":{"code":"invalid_request","message":"not JSON"}}`,
	} {
		if b, _ := json.Marshal(f); string(b) != want {
			t.Errorf("%s, want %s", b, want)
		}
	}
}

func TestManualFrame(t *testing.T) {
	f := ManualFrame("9")
	var m struct {
		Tools []struct{ Name string } `json:"tools"`
	}
	if f.Type != Manual || f.ID != "9" || json.Unmarshal(f.Manual, &m) != nil {
		t.Fatalf("ManualFrame = %+v", f)
	}
	var names []string
	for _, tool := range m.Tools {
		names = append(names, tool.Name)
	}
	if got := strings.Join(names, ","); got != "echo,add,fail,sleep,count" {
		t.Errorf("manual tools = %s", got)
	}
}

func ptr[T any](v T) *T { return &v }
