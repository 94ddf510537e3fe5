package socket

import (
	"encoding/base64"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/utcpd/utcpd/internal/jsonx"
	"github.com/utcpd/utcpd/utcp"
)

// ConvertResponse turns an answer that is not an envelope into a value by
// response_format: "json" (an error when it is not JSON), "text", "raw"
// (base64); any other format takes JSON when it parses, else UTF-8 text,
// else base64.
func ConvertResponse(prefix, format string, data []byte) (any, error) {
	switch format {
	case "json":
		v, ok := jsonx.DecodeValue(data)
		if !ok {
			return nil, &utcp.TransportError{Err: fmt.Errorf("%s: response_format is json but the answer is not JSON: %s", prefix, jsonx.Excerpt(data))}
		}
		return v, nil
	case "text":
		return string(data), nil
	case "raw":
		return base64.StdEncoding.EncodeToString(data), nil
	}
	if v, ok := jsonx.DecodeValue(data); ok {
		return v, nil
	}
	if utf8.Valid(data) {
		return string(data), nil
	}
	return base64.StdEncoding.EncodeToString(data), nil
}

// placeholder matches UTCP_ARG_<name>_UTCP_END and python-utcp's
// UTCP_ARG_<name>_UTCP_ARG.
var placeholder = regexp.MustCompile(`UTCP_ARG_([A-Za-z0-9_.\-]+?)_UTCP_(?:END|ARG)`)

// RenderRequest builds a request payload without the envelope:
// format "json" (or anything but "text") is the arguments as a compact
// JSON object; format "text" replaces each placeholder of tmpl by the
// argument as text (jsonx.ArgString), or, when tmpl is empty, joins the
// argument values by spaces in the order of their names. A placeholder
// naming a missing argument is an invalid_arguments error naming it.
func RenderRequest(prefix, format, tmpl string, args map[string]any) ([]byte, error) {
	if format != "text" {
		if args == nil {
			args = map[string]any{}
		}
		return jsonx.Marshal(args)
	}
	if tmpl == "" {
		names := make([]string, 0, len(args))
		for k := range args {
			names = append(names, k)
		}
		sort.Strings(names)
		parts := make([]string, 0, len(names))
		for _, k := range names {
			if s, ok := jsonx.ArgString(args[k]); ok {
				parts = append(parts, s)
			}
		}
		return []byte(strings.Join(parts, " ")), nil
	}
	var missing error
	out := placeholder.ReplaceAllStringFunc(tmpl, func(m string) string {
		name := placeholder.FindStringSubmatch(m)[1]
		s, ok := jsonx.ArgString(args[name])
		if !ok && missing == nil {
			missing = utcp.NewError(utcp.CodeInvalidArguments, "%s: request_data_template needs argument %q, which the call does not have", prefix, name).WithDetail("missing", []string{name})
		}
		return s
	})
	if missing != nil {
		return nil, missing
	}
	return []byte(out), nil
}
