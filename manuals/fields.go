package manuals

import "slices"

// Fields of the client configuration and its parts.
var (
	configFields       = []string{"manual_call_templates", "variables", "load_variables_from", "tool_repository", "tool_search_strategy", "post_processing", "gateway"}
	configLegacyFields = []string{"providers", "providers_file_path"}

	loaderFields       = []string{"variable_loader_type", "env_file_path", "optional"}
	loaderLegacyFields = []string{"type"}

	repositoryFields = map[string][]string{
		"in_memory": {"tool_repository_type"},
	}
	searchStrategyFields = map[string][]string{
		"tag_and_description_word_match": {"tool_search_strategy_type", "tag_weight", "description_weight"},
		"in_mem_embeddings":              {"tool_search_strategy_type", "model_name", "similarity_threshold", "max_workers", "cache_embeddings"},
	}
	toolFilterFields    = []string{"exclude_tools", "only_include_tools", "exclude_manuals", "only_include_manuals"}
	postProcessorFields = map[string][]string{
		FilterDictType:   append([]string{"tool_post_processor_type", "exclude_keys", "only_include_keys"}, toolFilterFields...),
		LimitStringsType: append([]string{"tool_post_processor_type", "limit"}, toolFilterFields...),
	}
)

// sortedKeys returns the keys of m, sorted.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
