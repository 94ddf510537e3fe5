// Package cli is the transport for call_template_type "cli": tools that
// are command lines run by bash on the daemon's host, as in python-utcp
// v1.1 (utcp-cli 1.1.3 and later), with the differences listed below.
//
// # Template
//
//	{
//	  "name": "git_tools",
//	  "call_template_type": "cli",
//	  "commands": [
//	    {"command": "cd UTCP_ARG_target_dir_UTCP_END", "append_to_final_output": false},
//	    {"command": "git status --porcelain", "append_to_final_output": false},
//	    {"command": "echo \"Found changes: $CMD_1_OUTPUT\""}
//	  ],
//	  "env_vars": {"GIT_TERMINAL_PROMPT": "0"},
//	  "inherit_env_vars": ["PATH", "HOME"],
//	  "working_dir": "/repo",
//	  "timeout": 30000,
//	  "stdin_arguments": false,
//	  "allow_dash_arguments": []
//	}
//
// commands is required and must not be empty. auth must be null. env_vars
// are set on top of the inherited environment. inherit_env_vars null (or
// absent) inherits the allowlist DefaultInherit (PATH, HOME, LANG, LC_*,
// USER, TMPDIR, TZ, ...); [] inherits nothing; a list inherits exactly the
// variables it names. working_dir is the process's working directory.
// timeout is in milliseconds (default 120 s for calls, 60 s for
// discovery; a sooner context deadline wins).
//
// stdin_arguments is a utcpd extension: when true, the call's arguments
// are written to the process's standard input as one JSON object (and {}
// during discovery). Placeholders travel in environment variables, and
// Linux refuses any single environment string over 128 KiB, so large or
// structured arguments should be read from standard input instead. All
// steps share the script's standard input: the first command that reads
// it consumes it. Without stdin_arguments, standard input is /dev/null.
//
// # Execution
//
// All commands of a template run, in order, in one bash process
// ("bash --noprofile --norc -c <script>"), so cd, shell variables and
// functions persist from one step to the next. The standard output of
// step i is available to later steps as $CMD_i_OUTPUT (trailing newlines
// removed). By default only the last step's output is the result;
// append_to_final_output true adds a step's output (in step order), false
// removes it. A step that exits non-zero ends the script with that status,
// so a failed cd never lets the next step run in the wrong directory
// (python-utcp runs on; write "cmd || true" to continue). Standard error is
// not merged into step outputs (python-utcp merges it).
//
// The script text comes only from the manual. Argument values never
// appear in it: each placeholder UTCP_ARG_<name>_UTCP_END becomes a
// reference to a per-call environment variable __UTCP_ARG_<nonce>_<name>
// (names with characters other than letters, digits and _ get a numbered
// variable), written for the placeholder's quote context: "$V" unquoted
// or inside $(...) and backquotes, ${V} inside double quotes, '"$V"'
// inside single quotes and '"$V"$' inside $'...'. The value therefore
// expands to exactly one word and is never parsed as shell code. Strings
// are passed as they are, numbers in their JSON spelling, and other values
// JSON-encoded. A placeholder escaped with a backslash or inside a comment
// is left alone. A missing argument is an invalid_arguments error.
//
// A placeholder is accepted only where bash treats its value as data:
// an argument of a program, a function or a builtin whose arguments are
// plain words, a plain assignment value (not to one of bash's own
// variables or a variable the template gives attributes), a redirection
// target, a case or for word, a [[ ]] string operand, or the word of a
// ${x:-word}-style expansion in those positions. Any other position
// (arithmetic, variable names, code, the command name, here-documents,
// positions the parser does not know) makes the template invalid, with
// an error naming the step, the command and the context. To compute with
// a value, copy it into a variable, check it, then compute:
//
//	n=UTCP_ARG_n_UTCP_END; [[ $n =~ ^[0-9]+$ ]] || exit 2; echo $((n + 1))
//
// A value starting with "-" whose placeholder begins an argument word is
// refused (invalid_arguments) unless allow_dash_arguments lists the
// argument, so a caller cannot turn an operand into an option.
//
// Placeholders cannot protect code that evaluates its input again: a
// variable later used in $((...)), eval, ssh host '...', or a program
// that runs its argument (find -exec, xargs) is the template's own
// responsibility.
//
// The process gets its own process group. When the timeout passes, the
// context ends, the output exceeds its cap or the transport closes, the
// whole group is killed with SIGKILL and reaped before the call returns.
// After a normal exit the group is killed too, so a tool cannot leave
// background processes behind (a descendant that calls setsid escapes;
// its pipes are abandoned after a short grace period).
//
// # Results
//
// The result is the standard output if it is not blank, else the
// standard error, trimmed, decoded as JSON when it starts with { or [ and
// parses (numbers as json.Number), else the text. A non-zero exit is a
// *utcp.ToolError: Status is the exit status (128+n after signal n), the
// message ends with the last StderrTailBytes of standard error, and Value
// is the decoded output. Standard output and standard error are each
// capped at Config.MaxOutputBytes (DefaultMaxOutputBytes, 16 MiB); a run
// that prints more on standard output, or whose step output file grows
// past it, is killed and fails with payload_too_large. Standard error past
// the cap is dropped (its tail is kept).
//
// No exit status means "tool not found": a cli tool is its commands, the
// tool name never reaches the process, and unknown names are refused by
// the registry before a call is dispatched. Exit 127 (bash's "command not
// found") is a ToolError like any other status.
//
// # Streaming
//
// The transport implements transports.Streamer: CallToolStream yields one
// event per line of standard output as soon as the line is printed, the
// line decoded as JSON when it parses and as a string otherwise; blank
// lines are skipped. The stream ends with io.EOF after exit status 0, and
// with a *utcp.ToolError otherwise. Each line is capped; the stream as a
// whole is not. Closing the stream kills the process group.
//
// # Discovery
//
// RegisterManual runs the manual template's commands with no arguments
// and parses their standard output as, in order: a full UTCP manual
// (v1.1 or legacy, through manuals.ParseManual), a JSON list of tools or a
// single tool, then newline-delimited JSON (a manual on one line, or one
// tool per line; other lines are ignored). Tools without a
// tool_call_template keep none; the gateway then uses the manual's
// template. The transport keeps no per-manual state: Release does
// nothing, and Close kills every process still running.
//
// The transport needs a Unix system (bash, process groups); it does not
// build on Windows.
package cli
