package file

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/utcp"
)

// Type is the call_template_type this package implements.
const Type = "file"

// Template is the file-specific part of a call template
// (call_template_type "file").
type Template struct {
	// FilePath is the file to read: a UTCP manual or an OpenAPI
	// description (JSON or YAML) for discovery, or any content a tool
	// answers with. Required.
	FilePath string `json:"file_path" jsonschema:"required"`
	// AuthTools is the auth given to the tools of a converted OpenAPI
	// document where it fits their security scheme.
	AuthTools *utcp.Auth `json:"auth_tools,omitempty"`
}

// Validate checks that file_path is set and that auth_tools is a valid
// auth block.
func (t *Template) Validate() error {
	if strings.TrimSpace(t.FilePath) == "" {
		return fmt.Errorf("field file_path is required and must not be empty")
	}
	if strings.ContainsRune(t.FilePath, 0) {
		return fmt.Errorf("field file_path contains a NUL byte")
	}
	if err := transports.ValidateAuth(t.AuthTools); err != nil {
		return fmt.Errorf("field auth_tools: %w", err)
	}
	return nil
}

// ParseTemplate decodes a file call template: the base fields and the
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
			Message: "file: field auth must be null: a file template is read locally (use auth_tools for the tools of an OpenAPI document)",
			Err:     transports.ErrInvalidTemplate,
		}
	}
	return tmpl, nil
}

// Check refuses what RegisterManual would fail on before it reads
// anything: a file_path that does not exist, cannot be looked at, or is
// not a regular file (transports.Checker). It is a discovery_failed
// error, as the read itself would be: the file may appear later.
func (t *Template) Check() error {
	fi, err := os.Stat(t.FilePath)
	if err == nil && !fi.Mode().IsRegular() {
		err = errors.New("not a regular file")
	}
	if err != nil {
		if pe, ok := errors.AsType[*fs.PathError](err); ok {
			err = pe.Err // the path is in the message already
		}
		return &utcp.Error{Code: utcp.CodeDiscoveryFailed, Message: fmt.Sprintf("file: %s: %v", t.FilePath, err), Err: err}
	}
	return nil
}
