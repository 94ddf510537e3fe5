package manuals

import (
	"maps"
	"slices"
)

// Fields of the client configuration and its parts.
var (
	// configFields ends with "$schema": a configuration may name the JSON
	// Schema it follows (docs/config.schema.json) for editors; utcpd
	// ignores its value.
	configFields       = []string{"manual_call_templates", "variables", "load_variables_from", "tool_repository", "tool_search_strategy", "post_processing", "gateway", "$schema"}
	configLegacyFields = []string{"providers", "providers_file_path"}

	loaderFields       = []string{"variable_loader_type", "env_file_path", "optional"}
	loaderLegacyFields = []string{"type"}

	repositoryFields = map[string][]string{
		"in_memory": {"tool_repository_type"},
	}
	searchStrategyFields = map[string][]string{
		"tag_and_description_word_match": {"tool_search_strategy_type", "tag_weight", "description_weight"},
		"in_mem_embeddings":              {"tool_search_strategy_type", "model_name", "similarity_threshold", "max_workers", "cache_embeddings"},
		"bm25":                           {"tool_search_strategy_type"},
	}
	toolFilterFields    = []string{"exclude_tools", "only_include_tools", "exclude_manuals", "only_include_manuals"}
	postProcessorFields = map[string][]string{
		FilterDictType:   append([]string{"tool_post_processor_type", "exclude_keys", "only_include_keys"}, toolFilterFields...),
		LimitStringsType: append([]string{"tool_post_processor_type", "limit"}, toolFilterFields...),
	}
)

// ConfigKeys are the keys ParseConfig knows in a client configuration,
// section by section: a key outside them is an unknown field (a
// warning; an error with Options.Strict). The maps are keyed by the
// section's type (tool_repository_type, tool_search_strategy_type,
// tool_post_processor_type) and list every key of a section of that
// type, its type key included.
type ConfigKeys struct {
	// Config and ConfigLegacy are the top-level keys: UTCP v1.1's (and
	// utcpd's gateway and $schema), and the legacy v0.1 ones.
	Config, ConfigLegacy []string
	// Loader and LoaderLegacy are the keys of a load_variables_from entry.
	Loader, LoaderLegacy []string
	// ToolRepository and SearchStrategy are the known types of
	// tool_repository and tool_search_strategy (an unknown type is a
	// warning, and its keys are not checked).
	ToolRepository, SearchStrategy map[string][]string
	// PostProcessor are the types of post_processing entries (an unknown
	// type is an error).
	PostProcessor map[string][]string
}

// KnownConfigKeys returns the keys ParseConfig knows (see ConfigKeys),
// for schemas and documentation. The result is a copy.
func KnownConfigKeys() ConfigKeys {
	clone := func(m map[string][]string) map[string][]string {
		out := maps.Clone(m)
		for k, v := range out {
			out[k] = slices.Clone(v)
		}
		return out
	}
	return ConfigKeys{
		Config: slices.Clone(configFields), ConfigLegacy: slices.Clone(configLegacyFields),
		Loader: slices.Clone(loaderFields), LoaderLegacy: slices.Clone(loaderLegacyFields),
		ToolRepository: clone(repositoryFields), SearchStrategy: clone(searchStrategyFields),
		PostProcessor: clone(postProcessorFields),
	}
}

// sortedKeys returns the keys of m, sorted.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
