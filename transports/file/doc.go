// Package file is the transport for call_template_type "file": a manual
// (or a tool's answer) read from a local file, as in python-utcp v1.1's
// utcp-file.
//
//	{
//	  "name": "github_manual",
//	  "call_template_type": "file",
//	  "file_path": "/etc/utcpd/manuals/github.yaml",
//	  "auth_tools": {"auth_type": "api_key", "api_key": "${GITHUB_TOKEN}", "var_name": "Authorization"}
//	}
//
// file_path is required; auth must be null. The configuration loader
// makes file_path absolute (relative to the configuration file); a
// relative path that reaches the transport is taken relative to the
// daemon's working directory. Files are read up to Config.MaxFileBytes
// (DefaultMaxFileBytes, 16 MiB); a larger file is a payload_too_large
// error.
//
// Discovery decodes the file as JSON, else YAML, whatever its extension
// (manuals.DecodeDocument). A document with an openapi, swagger or paths
// key is an OpenAPI description, converted with manuals.ConvertOpenAPI
// using the file:// URL of the file as spec URL and auth_tools as the auth
// of the generated tools where it fits their security scheme; any other
// document is read as a UTCP manual (v1.1 or legacy) with
// manuals.ParseManual. Every discovery failure is a discovery_failed
// error naming the file and the problem.
//
// A file tool cannot run code: CallTool reads the file on each call and
// returns its contents, decoded as JSON when they parse (numbers as
// json.Number) and as a string otherwise. The transport keeps no state:
// Release does nothing, and after Close, RegisterManual and
// CallTool fail with unavailable.
package file
