package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/utcpd/utcpd/internal/netguard"
	"github.com/utcpd/utcpd/manuals"
	"github.com/utcpd/utcpd/registry"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/utcp"
)

// This file confines the tools of remote manuals (docs/security.md,
// "Remote manuals and outgoing connections"). A manual template is the
// admin's and is trusted as written. The tool templates a manual lists
// were written by whoever served the manual; when that manual came over
// the network, they get the trust of the manual's origin and no more:
//
//   - allow_insecure (and grpc's insecure_skip_verify) is ignored, with a
//     warning naming the tool;
//   - every destination the template names must be the manual's origin
//     (the host and port of the manual template's URL or address) or in
//     the allowed_hosts the admin put on the manual template, and none may
//     be one of the daemon's own listeners: a tool outside that is dropped
//     with a warning;
//   - the tool's calls carry the manual's netguard.Policy, so that the
//     dial-time check refuses link-local and metadata addresses, loopback
//     and private ranges outside the origin and allowed_hosts, and the
//     daemon's own listeners — whatever a name resolves to or a redirect
//     says.
//
// Manuals of the local types (cli: the output of a command the admin
// wrote; text: content the admin wrote; file: a file the admin named) are
// the admin's, tools included. A tool without a tool_call_template uses
// its manual's template, which is the admin's.

// localManualTypes are the manual types whose manuals are read from what
// the admin named on this machine, not fetched over the network.
var localManualTypes = map[string]bool{"cli": true, "text": true, "file": true}

// remotePolicy returns the netguard policy for the tools of manual name
// (template tmpl, variables resolved in resolved), nil for a manual of a
// local type. allowed_hosts that do not parse are invalid_template.
func remotePolicy(name string, resolved *utcp.CallTemplate) (*netguard.Policy, error) {
	allowed, err := netguard.ParseHosts(resolved.AllowedHosts)
	if err != nil {
		return nil, utcp.Errorf(utcp.CodeInvalidTemplate, "manual %q: %w", name, err).WithDetail("field", "allowed_hosts")
	}
	if localManualTypes[resolved.Type] {
		return nil, nil
	}
	var origin []netguard.HostPort
	if e, ok := resolved.Spec.(transports.Endpointer); ok {
		origin, _ = e.Endpoints() // a manual naming no network origin (an MCP stdio server) gives its tools none
	}
	return netguard.NewPolicy(name, origin, allowed), nil
}

// confineRemote applies the rules above to tool, registered from a manual
// with policy pol (nil: nothing to do) and template mtmpl. It returns the
// warnings and whether the tool is kept; a kept remote tool has its
// toolState's policy set.
func (g *Gateway) confineRemote(pol *netguard.Policy, mtmpl *utcp.CallTemplate, tool *registry.Tool) ([]string, bool) {
	ts, _ := tool.Ext.(*toolState)
	if pol == nil || ts == nil || ts.tmpl == mtmpl || sameJSON(ts.tmpl.Raw, mtmpl.Raw) {
		return nil, true
	}
	var warns []string
	if raw, stripped := stripInsecure(ts.tmpl.Raw); len(stripped) > 0 {
		parsed, err := g.types.ParseTemplate(raw)
		if err != nil {
			return []string{fmt.Sprintf("tool %q dropped: %v", tool.Name, err)}, false
		}
		ts.tmpl, tool.Def.ToolCallTemplate, ts.hasVars = &parsed, &parsed, manuals.HasVariables(raw)
		warns = append(warns, fmt.Sprintf("tool %q: %s ignored: its template comes from remote manual %q, not from the admin",
			tool.Name, strings.Join(stripped, " and "), tool.Manual))
	}
	check := ts.tmpl
	if ts.hasVars {
		// Checked again at call time once the variables resolve
		// (templateFor); here only when they do already.
		check, _ = g.resolve(ts.tmpl, tool.Manual)
	}
	if check != nil {
		if err := confine(pol, check); err != nil {
			return append(warns, fmt.Sprintf("tool %q dropped: %v", tool.Name, err)), false
		}
	}
	ts.policy = pol
	return warns, true
}

// confine checks that every destination tmpl names is allowed by pol.
func confine(pol *netguard.Policy, tmpl *utcp.CallTemplate) error {
	e, ok := tmpl.Spec.(transports.Endpointer)
	if !ok {
		if localManualTypes[tmpl.Type] {
			return nil // granted by the admin's allowed_communication_protocols
		}
		return fmt.Errorf("a %s template from remote manual %q cannot be checked against the manual's origin", tmpl.Type, pol.Manual())
	}
	eps, err := e.Endpoints()
	if err != nil {
		return fmt.Errorf("a template from remote manual %q may not use it: %s: %w", pol.Manual(), tmpl.Type, err)
	}
	if tmpl.Auth != nil && tmpl.Auth.TokenURL != "" {
		ep, err := transports.URLEndpoint("auth.token_url", tmpl.Auth.TokenURL)
		if err != nil {
			return err
		}
		eps = append(eps, ep)
	}
	for _, ep := range eps {
		if netguard.OwnListenerHost(ep.Host, ep.Port) {
			return fmt.Errorf("%s is one of utcpd's own listeners, which no tool of remote manual %q may reach", ep, pol.Manual())
		}
		if !pol.Allows(ep.Host, ep.Port) {
			return fmt.Errorf("%s is neither the origin of remote manual %q nor in its allowed_hosts (allowed: %s)",
				ep, pol.Manual(), strings.Join(pol.Hosts(), ", "))
		}
	}
	return nil
}

// forbiddenTemplate is confine's refusal at call time.
func forbiddenTemplate(tool string, pol *netguard.Policy, err error) error {
	return utcp.Errorf(utcp.CodeForbidden, "tool %q: %w", tool, err).WithDetail("manual", pol.Manual())
}

// stripInsecure removes the fields of raw that lower transport security
// when they are set: allow_insecure and insecure_skip_verify at the top
// level, and allow_insecure of each MCP server. It returns raw unchanged
// and nil when none is set.
func stripInsecure(raw json.RawMessage) (json.RawMessage, []string) {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return raw, nil
	}
	var stripped []string
	for _, k := range []string{"allow_insecure", "insecure_skip_verify"} {
		if isTrue(m[k]) {
			delete(m, k)
			stripped = append(stripped, k)
		}
	}
	var cfg map[string]json.RawMessage
	if json.Unmarshal(m["config"], &cfg) == nil {
		var servers map[string]map[string]json.RawMessage
		if json.Unmarshal(cfg["mcpServers"], &servers) == nil {
			changed := false
			for _, s := range servers {
				if isTrue(s["allow_insecure"]) {
					delete(s, "allow_insecure")
					changed = true
				}
			}
			if changed {
				cfg["mcpServers"], _ = json.Marshal(servers)
				m["config"], _ = json.Marshal(cfg)
				if !slices.Contains(stripped, "allow_insecure") {
					stripped = append(stripped, "allow_insecure")
				}
			}
		}
	}
	if len(stripped) == 0 {
		return raw, nil
	}
	out, err := json.Marshal(m)
	if err != nil {
		return raw, nil
	}
	return out, stripped
}

func isTrue(v json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(v), []byte("true")) }

// sameJSON reports whether a and b are the same JSON text up to
// insignificant white space.
func sameJSON(a, b json.RawMessage) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var ca, cb bytes.Buffer
	return json.Compact(&ca, a) == nil && json.Compact(&cb, b) == nil && bytes.Equal(ca.Bytes(), cb.Bytes())
}
