package utcpd_test

import (
	"os/exec"
	"strings"
	"testing"
)

const mod = "github.com/utcpd/utcpd"

// TestDependencyDirection keeps the package graph DESIGN.md draws:
// utcp ← manuals ← registry ← gateway ← api ← cmd/utcpd; a transport imports
// only transports, its helper packages, utcp, manuals and internal/netguard
// (the dial-time address check); a guard imports
// only guard and utcp; transports/cli and guard/holguard share the bash
// lexer internal/shellword, which imports nothing of the module; nothing
// imports cmd/.
func TestDependencyDirection(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, imports := strings.TrimPrefix(fields[0], mod), fields[1:]
		for _, imp := range imports {
			if !strings.HasPrefix(imp, mod) {
				if pkg == "/utcp" && strings.Contains(imp, ".") {
					t.Errorf("utcp imports %s: it must use the standard library only", imp)
				}
				continue
			}
			dep := strings.TrimPrefix(imp, mod)
			if reason := forbidden(pkg, dep); reason != "" {
				t.Errorf("%s imports %s: %s", fields[0], imp, reason)
			}
		}
	}
}

func under(pkg, prefix string) bool { return pkg == prefix || strings.HasPrefix(pkg, prefix+"/") }

func forbidden(pkg, dep string) string {
	switch {
	case under(dep, "/cmd"):
		return "nothing imports cmd/"
	case pkg == "/utcp":
		return "utcp imports nothing of the module"
	case pkg == "/manuals" && dep != "/utcp":
		return "manuals imports only utcp"
	case under(pkg, "/registry") && !(dep == "/utcp" || dep == "/manuals" || under(dep, "/registry")):
		return "registry imports only utcp and manuals"
	case dep == "/internal/shellword" && !(pkg == "/transports/cli" || pkg == "/guard/holguard"):
		return "only transports/cli and guard/holguard use the bash lexer internal/shellword"
	case pkg == "/internal/shellword":
		return "shellword imports nothing of the module"
	case pkg == "/guard/holguard" && dep == "/internal/shellword":
		return ""
	case under(pkg, "/guard") && !(dep == "/utcp" || under(dep, "/guard")):
		return "a guard imports only guard and utcp"
	case under(pkg, "/transports") && !under(pkg, "/transports/all") && !under(pkg, "/transports/transporttest"):
		if dep == "/utcp" || dep == "/manuals" || dep == "/transports" || dep == "/internal/netguard" ||
			pkg == "/transports/cli" && dep == "/internal/shellword" {
			return ""
		}
		return "a transport imports only transports, utcp, manuals and internal/netguard"
	case pkg == "/internal/netguard" && dep != "/utcp":
		return "netguard imports only utcp"
	case under(pkg, "/gateway") && (under(dep, "/api")):
		return "gateway must not import api"
	}
	return ""
}
