package manuals

import "slices"

// BaseTemplateFields are the fields every call template has, whatever its
// call_template_type.
var BaseTemplateFields = []string{"name", "call_template_type", "auth", "allowed_communication_protocols", "allowed_hosts"}

// TemplateFields lists, for each standard call_template_type, the fields
// UTCP v1.1 defines beyond BaseTemplateFields (python-utcp 1.1 models; the
// v0.1 provider documents for grpc and webrtc, which have no v1 model).
//
// It is the fallback for unknown-field warnings and "did you mean" hints
// when no TemplateParser is given or the parser cannot list fields. The
// transports are the authority: a transport may accept more fields than
// this table, so pass Options.Parser to ParseConfig for exact checks.
// Types missing from the table are not checked without a parser.
var TemplateFields = map[string][]string{
	"http":            {"url", "http_method", "content_type", "headers", "body_field", "header_fields", "auth_tools"},
	"sse":             {"url", "event_type", "reconnect", "retry_timeout", "headers", "body_field", "header_fields"},
	"streamable_http": {"url", "http_method", "content_type", "chunk_size", "timeout", "headers", "body_field", "header_fields"},
	"cli":             {"commands", "env_vars", "inherit_env_vars", "working_dir"},
	"text":            {"content", "base_url", "auth_tools"},
	"file":            {"file_path", "auth_tools"},
	"mcp":             {"config", "register_resources_as_tools"},
	"websocket":       {"url", "message", "protocol", "keep_alive", "response_format", "timeout", "headers", "header_fields"},
	"graphql":         {"url", "operation_type", "operation_name", "query", "variable_types", "headers", "header_fields"},
	"tcp": {"host", "port", "request_data_format", "request_data_template", "response_byte_format", "framing_strategy",
		"length_prefix_bytes", "length_prefix_endian", "message_delimiter", "interpret_escape_sequences",
		"fixed_message_length", "max_response_size", "timeout"},
	"udp":    {"host", "port", "number_of_response_datagrams", "request_data_format", "request_data_template", "response_byte_format", "timeout"},
	"grpc":   {"host", "port", "service_name", "method_name", "use_ssl"},
	"webrtc": {"signaling_server", "peer_id", "data_channel_name"},
}

// knownTemplateFields returns every field a template of type typ may have
// according to TemplateFields, nil when typ is not in the table.
func knownTemplateFields(typ string) []string {
	f, ok := TemplateFields[typ]
	if !ok {
		return nil
	}
	return append(slices.Clone(BaseTemplateFields), f...)
}

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
