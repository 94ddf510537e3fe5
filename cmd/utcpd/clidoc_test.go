package main

import (
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestCLIReferenceComplete: docs/cli.md names every command and every flag
// of each, so the reference cannot fall behind the code.
func TestCLIReferenceComplete(t *testing.T) {
	raw, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden {
			return
		}
		if c.HasParent() && !strings.Contains(doc, c.CommandPath()) {
			t.Errorf("docs/cli.md does not mention %q", c.CommandPath())
		}
		// The section of a top-level command, or the page for the root.
		section := doc
		if top := topLevel(c); top != nil {
			start := strings.Index(doc, "\n## "+top.CommandPath())
			if start < 0 {
				t.Errorf("docs/cli.md has no section %q", "## "+top.CommandPath())
				return
			}
			section = doc[start+1:]
			if end := strings.Index(section[3:], "\n## "); end >= 0 {
				section = section[:end+3]
			}
		}
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if f.Hidden {
				return
			}
			if !strings.Contains(section, "`--"+f.Name) && !strings.Contains(section, "[--"+f.Name) &&
				!strings.Contains(section, " --"+f.Name) && !strings.Contains(section, "(--"+f.Name) &&
				!strings.Contains(section, "/`--"+f.Name) {
				t.Errorf("docs/cli.md, section of %q, does not mention its flag --%s", c.CommandPath(), f.Name)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCmd())
}

// topLevel returns the child of the root that c is or is under, nil for
// the root.
func topLevel(c *cobra.Command) *cobra.Command {
	if !c.HasParent() {
		return nil
	}
	for c.Parent().HasParent() {
		c = c.Parent()
	}
	return c
}
