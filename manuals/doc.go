// Package manuals reads what users and servers hand utcpd: UTCP manuals,
// call templates and client configuration files, in UTCP v1.1 and in the
// legacy v0.1/v0.2 shapes. It turns them into v1.1, reports every problem
// with a location, and resolves the variables templates refer to.
//
// The package has five parts:
//
//   - Normalisation. NormalizeTemplate rewrites one legacy call template
//     (provider) into v1.1: provider_type/type/transport become
//     call_template_type, http_stream becomes streamable_http, method
//     becomes http_method, a cli command_name becomes commands, a text
//     template with file_path becomes file, cwd becomes working_dir.
//     ParseManual reads a whole manual (JSON or YAML, v1.1 or v0.1) and
//     normalises every tool's template.
//
//   - Client configuration. ParseConfig and LoadConfig read a client
//     configuration (v1.1 manual_call_templates, legacy providers and
//     providers_file_path, or a bare JSON array of providers). Unknown
//     fields are never fatal: each becomes a Warning naming its JSON path
//     and the closest known field; Options.Strict turns them into errors.
//     Malformed JSON is reported with file, line and column; semantic
//     errors with file, line and JSON path.
//
//   - Validation. Validate parses every manual template of a Config with
//     the transports' parser and returns every Problem at once, for
//     `utcpd config validate`.
//
//   - Variables. Namespace, Resolver, Substitute, RequiredVariables and
//     HasVariables implement the UTCP variable rules: ${VAR} and $VAR,
//     looked up under the manual's namespace in the config variables, then
//     the dotenv loaders, then the environment. Unlike the reference
//     implementations, `$$` escapes a literal dollar and the fields listed
//     in NoSubstitute (shell commands, GraphQL queries, message templates,
//     schemas) are never substituted.
//
//   - Post-processing. FilterDict and LimitStrings are the two UTCP tool
//     post-processors; they return new values and never mutate their input.
//
// The package imports only the standard library, utcp, godotenv and
// yaml.v3. Where it needs transport knowledge it takes a TemplateParser,
// which *transports.Registry satisfies.
package manuals
