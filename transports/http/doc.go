// Package http is the UTCP "http" transport: one HTTP request per tool
// call, following python-utcp v1.1's http communication protocol.
//
// A call maps the tool's arguments onto the request as UTCP prescribes:
// the arguments named in header_fields become headers, those named in
// cookie_fields (a utcpd extension) cookies of one Cookie header, the body_field
// argument becomes the body, {name} placeholders in the URL take the
// matching arguments (escaped), and every remaining argument becomes a
// query parameter. Discovery (RegisterManual) fetches the manual
// template's URL and accepts a UTCP manual (v1.1 or legacy v0.1, JSON or
// YAML) or an OpenAPI 3 / Swagger 2 document, which it converts.
//
// The transport is stateless apart from a pool of keep-alive connections
// and the oauth2 token cache; Release does nothing. Every URL,
// at discovery, at every call and at every redirect hop, must be https or
// plain http to a literal loopback host, unless the template sets
// "allow_insecure": true (see httpclient.CheckURL).
package http
