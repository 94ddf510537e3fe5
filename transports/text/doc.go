// Package text is the transport for call_template_type "text": a manual
// (or a tool's answer) carried inline in the call template, as in
// python-utcp v1.1's utcp-text.
//
//	{
//	  "name": "inline",
//	  "call_template_type": "text",
//	  "content": "{\"utcp_version\":\"1.1.0\",\"manual_version\":\"1.0.0\",\"tools\":[]}",
//	  "base_url": "https://api.example.com/v2",
//	  "auth_tools": {"auth_type": "api_key", "api_key": "${API_KEY}", "var_name": "X-Api-Key"}
//	}
//
// content is required; auth must be null. Discovery decodes content as
// JSON, else YAML (manuals.DecodeDocument). A document with an openapi,
// swagger or paths key is an OpenAPI description and is converted with
// manuals.ConvertOpenAPI, with spec URL "text://content", base_url as the
// base of every tool URL when set, and auth_tools as the auth of the
// generated tools where it fits their security scheme. Any other document
// is read as a UTCP manual (v1.1 or legacy) with manuals.ParseManual.
// Every discovery failure is a discovery_failed error naming the problem.
//
// A text tool cannot run code: CallTool returns the template's content
// itself, decoded as JSON when it parses (numbers as json.Number) and as
// a string otherwise. The transport keeps no state: Release does
// nothing, and after Close, RegisterManual and CallTool fail with
// unavailable.
package text
