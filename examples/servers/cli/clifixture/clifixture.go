// Package clifixture is the fixture CLI program: a command-line "server"
// for the cli transport that serves the fixture tools (echo, add, fail,
// sleep, count) of package fixture.
//
// The program has two commands:
//
//	<prog> manual
//	    prints the UTCP v1.1 manual of the fixture tools; every tool has a
//	    cli call template that runs this same executable (by the absolute
//	    path os.Executable reports).
//	<prog> call <tool> [--<name> <value>]...
//	    runs one fixture tool and prints its JSON result on one line. The
//	    arguments are the --name value pairs (string values) when there are
//	    any, else one JSON object read from standard input (empty input
//	    means {}). count prints one JSON line per number as it goes.
//
// Exit status: 0 on success; ExitFailure with the message on standard
// error when the tool reports a failure (*fixture.Failure); ExitUnknownTool
// for a name that is not a fixture tool; ExitUsage for a malformed command
// line or arguments.
//
// The logic lives here, importable, so that tests can run it inside their
// own test binary: a TestMain that calls Main when EnvVar is set turns the
// test binary into the fixture program, with no go build step.
package clifixture

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/utcpd/utcpd/transports/transporttest/fixture"
	"github.com/utcpd/utcpd/utcp"
)

// EnvVar is the environment variable that makes a test binary run Main.
// When the program itself runs with it set, the templates it prints set
// it too (in env_vars), so every tool re-enters the fixture program.
const EnvVar = "UTCPD_CLI_FIXTURE"

// Exit statuses of the program.
const (
	ExitOK          = 0
	ExitFailure     = 1  // the tool reported a failure (the fail tool)
	ExitUnknownTool = 2  // no fixture tool has that name
	ExitUsage       = 64 // malformed command line or arguments
)

// Main runs the program with args (without the program name) and returns
// its exit status.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		return usage(stderr, "no command")
	}
	switch args[0] {
	case "manual":
		if len(args) != 1 {
			return usage(stderr, "manual takes no arguments")
		}
		exe, err := os.Executable()
		if err != nil {
			fmt.Fprintf(stderr, "clifixture: %v\n", err)
			return ExitFailure
		}
		var env map[string]string
		if v := os.Getenv(EnvVar); v != "" {
			env = map[string]string{EnvVar: v}
		}
		b, err := json.MarshalIndent(Manual(exe, env), "", "  ")
		if err != nil {
			fmt.Fprintf(stderr, "clifixture: %v\n", err)
			return ExitFailure
		}
		fmt.Fprintf(stdout, "%s\n", b)
		return ExitOK
	case "call":
		if len(args) < 2 {
			return usage(stderr, "call needs a tool name")
		}
		return call(args[1], args[2:], stdin, stdout, stderr)
	}
	return usage(stderr, fmt.Sprintf("unknown command %q", args[0]))
}

func usage(stderr io.Writer, msg string) int {
	fmt.Fprintf(stderr, "clifixture: %s\nusage: clifixture manual | clifixture call <tool> [--name value]...\n", msg)
	return ExitUsage
}

func call(tool string, flags []string, stdin io.Reader, stdout, stderr io.Writer) int {
	args, err := arguments(flags, stdin)
	if err != nil {
		return usage(stderr, err.Error())
	}
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	f := fixture.New()
	ctx := context.Background()
	if tool == fixture.Count {
		err = f.Stream(ctx, tool, args, func(v any) error { return enc.Encode(v) })
	} else {
		var v any
		if v, err = f.Call(ctx, tool, args); err == nil {
			err = enc.Encode(v)
		}
	}
	var failure *fixture.Failure
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &failure):
		fmt.Fprintln(stderr, failure.Message)
		return ExitFailure
	case errors.Is(err, fixture.ErrUnknownTool):
		fmt.Fprintf(stderr, "clifixture: %v\n", err)
		return ExitUnknownTool
	}
	return usage(stderr, err.Error())
}

// arguments reads the call's arguments from --name value pairs, or from
// standard input when there are none.
func arguments(flags []string, stdin io.Reader) (map[string]any, error) {
	args := map[string]any{}
	if len(flags) > 0 {
		for i := 0; i < len(flags); i += 2 {
			name, ok := strings.CutPrefix(flags[i], "--")
			if !ok || name == "" || i+1 >= len(flags) {
				return nil, fmt.Errorf("expected --name value pairs, got %q", flags[i:])
			}
			args[name] = flags[i+1]
		}
		return args, nil
	}
	data, err := io.ReadAll(stdin)
	if err != nil {
		return nil, fmt.Errorf("reading arguments: %w", err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return args, nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&args); err != nil {
		return nil, fmt.Errorf("arguments on standard input are not a JSON object: %w", err)
	}
	return args, nil
}

// Manual returns the fixture manual whose tools run exe. env, if not nil,
// becomes every template's env_vars. fail takes its message through a
// UTCP_ARG placeholder; the other tools read their arguments from
// standard input (stdin_arguments), so nested values and large arguments
// pass unchanged.
func Manual(exe string, env map[string]string) *utcp.Manual {
	return fixture.Manual(func(tool string) *utcp.CallTemplate {
		raw := ToolTemplate(exe, tool, env)
		return &utcp.CallTemplate{Type: "cli", Raw: raw}
	})
}

// ToolTemplate returns the cli call template that runs tool through exe.
func ToolTemplate(exe, tool string, env map[string]string) json.RawMessage {
	m := map[string]any{"call_template_type": "cli"}
	if tool == fixture.Fail {
		m["commands"] = []any{map[string]any{"command": ShellQuote(exe) + " call fail --message UTCP_ARG_message_UTCP_END"}}
	} else {
		m["commands"] = []any{map[string]any{"command": ShellQuote(exe) + " call " + ShellQuote(tool)}}
		m["stdin_arguments"] = true
	}
	if env != nil {
		m["env_vars"] = env
	}
	return marshal(m)
}

// ManualTemplate returns the manual call template whose discovery runs
// "exe manual". env, if not nil, becomes its env_vars.
func ManualTemplate(exe string, env map[string]string) json.RawMessage {
	m := map[string]any{
		"call_template_type": "cli",
		"commands":           []any{map[string]any{"command": ShellQuote(exe) + " manual"}},
	}
	if env != nil {
		m["env_vars"] = env
	}
	return marshal(m)
}

// ShellQuote quotes s as one bash word.
func ShellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func marshal(v any) json.RawMessage {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return json.RawMessage(bytes.TrimSpace(buf.Bytes()))
}
