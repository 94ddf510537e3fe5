package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/utcp"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3".
var version = "dev"

// versionString is the utcpd version: the -ldflags value, else the module
// version from the build information, else "dev".
func versionString() string {
	v := version
	if bi, ok := debug.ReadBuildInfo(); ok && v == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version
	}
	return v
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the utcpd version, the UTCP version and the transports built in",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprint(cmd.OutOrStdout(), versionText())
			return nil
		},
	}
}

// versionText is what utcpd version and utcpd --version print: the utcpd,
// UTCP and Go versions, then the transports built in.
func versionText() string {
	return fmt.Sprintf("utcpd %s (UTCP %s, %s)\ntransports: %v\n", versionString(), utcp.Version, runtime.Version(), transports.Default.Types())
}
