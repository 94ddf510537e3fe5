package kindcfg

import "github.com/utcpd/utcpd/internal/glob"

// Glob is a compiled name pattern (internal/glob): '*' any run of
// characters, dots included, '?' exactly one character.
type Glob = glob.Glob

// Globs is a list of patterns; a name matches the list when it matches
// any of them.
type Globs = glob.Globs

// CompileGlob compiles pattern. Every pattern is valid.
func CompileGlob(pattern string) Glob { return glob.Compile(pattern) }

// CompileGlobs compiles patterns.
func CompileGlobs(patterns []string) Globs { return glob.CompileAll(patterns) }
