package text

import (
	"encoding/json"
	"fmt"
	"net/url"

	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/utcp"
)

// Type is the call_template_type this package implements.
const Type = "text"

// Template is the text-specific part of a call template
// (call_template_type "text").
type Template struct {
	// Content is the inline document: a UTCP manual or an OpenAPI
	// description (JSON or YAML) for discovery, or any text a tool
	// answers with. Required.
	Content string `json:"content" jsonschema:"required"`
	// BaseURL, when set, is the base of every tool URL of a converted
	// OpenAPI document, overriding its servers.
	BaseURL string `json:"base_url,omitempty"`
	// AuthTools is the auth given to the tools of a converted OpenAPI
	// document where it fits their security scheme.
	AuthTools *utcp.Auth `json:"auth_tools,omitempty"`
}

// Validate checks that content is set, that base_url is an absolute
// http(s) URL when set, and that auth_tools is a valid auth block.
func (t *Template) Validate() error {
	if t.Content == "" {
		return fmt.Errorf("field content is required and must not be empty")
	}
	if t.BaseURL != "" {
		u, err := url.Parse(t.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("field base_url %q is not an absolute http or https URL", t.BaseURL)
		}
	}
	if err := transports.ValidateAuth(t.AuthTools); err != nil {
		return fmt.Errorf("field auth_tools: %w", err)
	}
	return nil
}

// ParseTemplate decodes a text call template: the base fields and the
// Template fields (unknown ones warn with a did-you-mean, see
// transports.DecodeTemplate). A template with auth is invalid_template.
func ParseTemplate(raw json.RawMessage) (utcp.CallTemplate, error) {
	tmpl, err := transports.DecodeTemplate(raw, &Template{})
	if err != nil {
		return tmpl, err
	}
	if tmpl.Auth != nil {
		return tmpl, &utcp.Error{
			Code:    utcp.CodeInvalidTemplate,
			Message: "text: field auth must be null: a text template is read locally (use auth_tools for the tools of an OpenAPI document)",
			Err:     transports.ErrInvalidTemplate,
		}
	}
	return tmpl, nil
}
