// Command cli is the fixture CLI program for the cli transport: it prints
// a UTCP manual of the fixture tools ("cli manual") and runs them
// ("cli call <tool>"). See package clifixture.
//
//	go build -o /tmp/clifixture ./examples/servers/cli
//	/tmp/clifixture manual
//	echo '{"a": 2, "b": 3}' | /tmp/clifixture call add
package main

import (
	"os"

	"github.com/utcpd/utcpd/examples/servers/cli/clifixture"
)

func main() {
	os.Exit(clifixture.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
