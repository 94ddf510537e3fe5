package gateway

import (
	"fmt"
	"strings"

	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/utcp"
)

// limits are the discovery limits of every registration
// (Options.MaxToolsPerManual, Options.MaxManualBytes).
func (g *Gateway) limits() transports.DiscoveryLimits {
	l := transports.DiscoveryLimits{MaxTools: g.opts.MaxToolsPerManual, MaxBytes: g.opts.MaxManualBytes}
	if l.MaxTools == 0 {
		l.MaxTools = transports.DefaultMaxToolsPerManual
	}
	if l.MaxBytes == 0 {
		l.MaxBytes = transports.DefaultMaxManualBytes
	}
	l.MaxTools, l.MaxBytes = max(l.MaxTools, 0), max(l.MaxBytes, 0) // < 0: no cap
	return l
}

// checkToolCount refuses a manual that lists more tools than
// max_tools_per_manual, whichever transport discovered it (or a stored
// copy registered again under a lower limit).
func (g *Gateway) checkToolCount(m *utcp.Manual) error {
	if l := g.limits(); l.MaxTools > 0 && len(m.Tools) > l.MaxTools {
		return transports.TooManyTools(l.MaxTools)
	}
	return nil
}

// toolName is the qualified name of a discovered tool, and a warning when
// it had to be changed. A discovered name is never read as
// "manual.tool" of another manual: a leading "<manual>." is dropped (as
// registry.QualifiedName does), and every other '.' becomes '_', so the
// qualified name is "<manual>.<name without dots>". A transport that
// names its tools "<prefix>.<tool>" itself, with a prefix from the
// admin's manual template (transports.PrefixedNames: mcp's
// "<server>.<tool>"), keeps the first '.'; the dots of the tool part are
// replaced. The backend still receives the name as discovered.
func (g *Gateway) toolName(manual string, mtmpl *utcp.CallTemplate, name string) (string, string) {
	rest := name
	if r, ok := strings.CutPrefix(name, manual+"."); ok && r != "" {
		rest = r
	}
	if strings.IndexByte(rest, '.') < 0 {
		return manual + "." + rest, ""
	}
	short := rest
	if g.prefixedNames(mtmpl) {
		if head, tail, ok := strings.Cut(rest, "."); ok && head != "" && tail != "" {
			short = head + "." + strings.ReplaceAll(tail, ".", "_")
		}
	} else {
		short = strings.ReplaceAll(rest, ".", "_")
	}
	q := manual + "." + short
	if short == rest {
		return q, ""
	}
	return q, fmt.Sprintf("tool name %q contains '.', which would read as another manual's qualified name; registered as %q", name, q)
}

// prefixedNames reports whether the transport of the manual template
// names its discovered tools "<prefix>.<tool>".
func (g *Gateway) prefixedNames(mtmpl *utcp.CallTemplate) bool {
	tr, err := g.transport(mtmpl.Type)
	if err != nil {
		return false
	}
	p, ok := tr.Unwrap().(transports.PrefixedNames)
	return ok && p.PrefixedToolNames()
}
