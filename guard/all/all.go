// Package all registers every guard kind utcpd ships with in
// guard.Default. Import it for its side effect:
//
//	import _ "github.com/utcpd/utcpd/guard/all"
package all

import (
	_ "github.com/utcpd/utcpd/guard/holguard" // kind "holguard"
	_ "github.com/utcpd/utcpd/guard/policy"   // kind "policy"
	_ "github.com/utcpd/utcpd/guard/webhook"  // kind "webhook"
)
