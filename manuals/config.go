package manuals

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/utcpd/utcpd/utcp"
)

// Options control ParseConfig and LoadConfig.
type Options struct {
	// Strict turns every warning whose StrictError is true (unknown
	// fields and values, ignored fields) into an error.
	Strict bool
	// Parser, when set, is used to find the unknown fields of every
	// manual call template (its CallTemplate.Unknown) with "did you mean"
	// hints from its KnownFields method when it has one (see FieldLister);
	// *transports.Registry is the parser that knows every transport's
	// fields. Without it the fields of call templates are not checked.
	// Templates the parser rejects are left for Validate to report;
	// ParseConfig does not fail on them.
	Parser TemplateParser
	// ReadFile reads LoadConfig's file and the file named by a legacy
	// providers_file_path. Nil means os.ReadFile with a 32 MiB cap.
	ReadFile func(name string) ([]byte, error)
}

// Config is a parsed client configuration, normalised to UTCP v1.1.
type Config struct {
	// Path is the configuration file as given to ParseConfig or
	// LoadConfig; "" when the configuration did not come from a file.
	Path string
	// Dir is the absolute folder of Path, against which relative paths
	// (file templates' file_path, dotenv env_file_path,
	// providers_file_path) were resolved; "" when Path is "".
	Dir string
	// Variables is the configuration's variables map (exact keys). Values
	// are as written; NewResolver substitutes them.
	Variables map[string]string
	// Loaders are the variable loaders of load_variables_from, in order.
	Loaders []Loader
	// ManualCallTemplates are the manual call templates, from
	// manual_call_templates, then the legacy providers, then the file of
	// the legacy providers_file_path, in document order. Names are unique.
	ManualCallTemplates []Template
	// ToolRepository is tool_repository, default in_memory.
	ToolRepository ToolRepository
	// SearchStrategy is tool_search_strategy, default
	// tag_and_description_word_match with weights 3 and 1.
	SearchStrategy SearchStrategy
	// PostProcessors are the post_processing entries, in order.
	PostProcessors []PostProcessor
	// Gateway is the utcpd-specific "gateway" object, uninterpreted; nil
	// when absent.
	Gateway json.RawMessage
	// Warnings are the non-fatal findings, in document order.
	Warnings []Warning
	// Rejected are the manual call templates CheckConfig found unusable
	// as written, in document order, each with its problems; they are not
	// in ManualCallTemplates. ParseConfig, which fails on any error, never
	// sets it.
	Rejected []Rejected

	// docs maps each file read to its line index, for Validate.
	docs map[string]*document
}

// Template is one manual call template of a Config.
type Template struct {
	// Raw is the template normalised to UTCP v1.1 (compact JSON): legacy
	// fields rewritten, name set to Name, a relative file_path of a file
	// template made absolute. Variables are not substituted.
	Raw json.RawMessage
	// Name is the sanitised manual name (utcp.SanitizeName), or a
	// generated "<type>_<n>" when the template had none.
	Name string
	// Type is the call_template_type.
	Type string
	// File, Line and Path locate the template: the file it was read from
	// (the configuration or a providers file), its 1-based line (0 when
	// unknown) and its JSON path, e.g. "manual_call_templates[2]".
	File string
	Line int
	Path string
	// Location is File, Line and Path formatted for messages:
	// "utcpd.json:12: manual_call_templates[2]".
	Location string
}

// Rejected is a manual call template that its transport cannot use as
// written: an unknown call_template_type, a required field missing, a
// value the transport refuses. Template is as in ManualCallTemplates.
type Rejected struct {
	Template
	// Problems are the template's errors, each with Manual set to Name;
	// never empty.
	Problems []Problem
}

// Err returns the rejection as one *utcp.Error: the code of the first
// problem, a one-line message joining every problem with "; ", and each
// problem in Details["problems"] (ProblemsOf reads them).
func (r *Rejected) Err() error {
	if len(r.Problems) == 0 {
		return nil
	}
	msgs := make([]string, len(r.Problems))
	for i, p := range r.Problems {
		msgs[i] = p.String()
	}
	return (&utcp.Error{Code: r.Problems[0].Code, Message: strings.Join(msgs, "; ")}).WithDetail("problems", r.Problems)
}

// Loader is one entry of load_variables_from.
type Loader struct {
	// Type is the variable_loader_type; only "dotenv" exists.
	Type string
	// EnvFilePath is the dotenv file, absolute when the configuration has
	// a folder (relative paths are resolved against Config.Dir).
	EnvFilePath string
	// Optional makes a missing file an empty source instead of an error
	// (a utcpd and lua-utcp extension).
	Optional bool
	// File, Line and Path locate the loader as Template's do; Location
	// formats them for messages.
	File     string
	Line     int
	Path     string
	Location string
}

// ToolRepository is the tool_repository section. utcpd keeps its own
// registry; the section is parsed so that configurations of other clients
// load, and kept whole in Raw.
type ToolRepository struct {
	// Type is tool_repository_type, default in_memory.
	Type string
	// Raw is the whole section; nil when it is absent.
	Raw json.RawMessage
}

// SearchStrategy is the tool_search_strategy section.
type SearchStrategy struct {
	// Type is tool_search_strategy_type.
	Type string
	// TagWeight and DescriptionWeight are the weights of the default
	// tag_and_description_word_match strategy (defaults 3 and 1).
	TagWeight         float64
	DescriptionWeight float64
	// Raw is the whole section, for strategies with other fields; nil when
	// the section is absent.
	Raw json.RawMessage
}

// The defaults of a configuration.
const (
	DefaultToolRepositoryType = "in_memory"
	DefaultSearchStrategyType = "tag_and_description_word_match"
	DefaultTagWeight          = 3.0
	DefaultDescriptionWeight  = 1.0
)

// LoadConfig reads the file at path (with Options.ReadFile, or os.ReadFile
// capped at 32 MiB) and parses it with ParseConfig. A file that cannot be
// read is an invalid_config error naming it.
func LoadConfig(path string, opts Options) (*Config, error) {
	data, err := opts.readFile(path)
	if err != nil {
		e := utcp.Errorf(utcp.CodeInvalidConfig, "%s: cannot read configuration: %w", path, err)
		return nil, e.WithDetail("file", path)
	}
	return ParseConfig(path, data, opts)
}

// ParseConfig parses a client configuration read from path (used for
// messages and to resolve relative paths; it may be ""). data is JSON, or
// YAML when path ends in .yaml or .yml (or data does not start with '{' or
// '[' and path does not end in .json).
//
// It accepts UTCP v1.1 (manual_call_templates, variables,
// load_variables_from, tool_repository, tool_search_strategy,
// post_processing), the legacy v0.1/v0.2 keys (providers, providers_file_path,
// loaders written {"type": "dotenv"}), the utcpd "gateway" object (kept
// uninterpreted), and a bare JSON array of providers. Every template is
// normalised with NormalizeTemplate.
//
// Unknown fields are never fatal: each is a Warning naming its JSON path
// and the closest known field. With opts.Strict the warnings whose
// StrictError is true become errors.
//
// On failure the error is a *utcp.Error: malformed JSON is invalid_config
// naming file, line and column; semantic errors name file, line and JSON
// path (invalid_config, or manual_exists for two templates whose names
// are equal after sanitising, naming both locations). Every error found
// is reported at once: ProblemsOf(err) lists them, and each is in the
// error chain. No Config is returned with an error.
func ParseConfig(path string, data []byte, opts Options) (*Config, error) {
	c, ok := parseConfig(path, data, opts, false)
	if !ok {
		if c.docErr != nil {
			return nil, c.docErr
		}
		return nil, problemsError(c.errs)
	}
	return c.finish()
}

// parseConfig parses a configuration into a configParser; ok is false
// when the document itself could not be read (c.errs says why). collect
// selects CheckConfig's mode: templates that cannot be used are set aside
// in Rejected, every template is parsed with opts.Parser, and nothing
// stops at an error.
func parseConfig(path string, data []byte, opts Options, collect bool) (c *configParser, ok bool) {
	cfg := &Config{
		Path:           path,
		Variables:      map[string]string{},
		ToolRepository: ToolRepository{Type: DefaultToolRepositoryType},
		SearchStrategy: SearchStrategy{Type: DefaultSearchStrategyType, TagWeight: DefaultTagWeight, DescriptionWeight: DefaultDescriptionWeight},
		docs:           map[string]*document{},
	}
	c = &configParser{opts: opts, cfg: cfg, collect: collect}
	if path != "" {
		dir, err := filepath.Abs(filepath.Dir(path))
		if err != nil {
			c.errs = append(c.errs, Problem{Severity: SeverityError, Code: utcp.CodeInvalidConfig, File: path, Message: err.Error()})
			return c, false
		}
		cfg.Dir = dir
	}
	doc, err := loadDocument(path, data, utcp.CodeInvalidConfig, isYAMLName(path), true)
	if err != nil {
		c.errs = append(c.errs, documentProblem(err))
		c.docErr = err
		return c, false
	}
	src := c.source(path, cfg.Dir, doc)
	var raws []rawTemplate
	switch firstByte(doc.json) {
	case '[':
		c.warn(src, WarnLegacy, "", "", "the file is a bare list of providers (UTCP v0.1); read as manual_call_templates")
		raws = c.templateList(src, doc.json, "")
	case '{':
		raws = c.top(src, doc.json)
	default:
		c.fail(src, utcp.CodeInvalidConfig, "", "a configuration must be a JSON object or an array of providers, got %s", jsonKind(doc.json))
	}
	c.templates(raws)
	return c, true
}

// documentProblem is the problem of a document that cannot be decoded
// (err from loadDocument, whose message names the file, line and column
// already: File and Line stay empty).
func documentProblem(err error) Problem {
	return Problem{Severity: SeverityError, Code: utcp.CodeOf(err), Message: err.Error()}
}

func (o Options) readFile(name string) ([]byte, error) {
	if o.ReadFile != nil {
		return o.ReadFile(name)
	}
	return readFileCapped(name)
}

// readFileCapped reads a file of at most maxFileSize bytes.
func readFileCapped(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxFileSize {
		return nil, fmt.Errorf("file is larger than %d MiB", maxFileSize>>20)
	}
	return data, nil
}

// source is one file being parsed.
type source struct {
	file string
	dir  string
	doc  *document
}

type rawTemplate struct {
	src  *source
	path string
	raw  json.RawMessage
}

type configParser struct {
	opts Options
	cfg  *Config
	errs []Problem
	// collect is CheckConfig's mode (see parseConfig).
	collect bool
	// docErr is loadDocument's error when the document is unreadable.
	docErr error
}

func (c *configParser) source(file, dir string, doc *document) *source {
	c.cfg.docs[file] = doc
	return &source{file: file, dir: dir, doc: doc}
}

func (c *configParser) warn(src *source, kind WarningKind, path, suggestion, format string, args ...any) {
	c.cfg.Warnings = append(c.cfg.Warnings, Warning{
		Kind: kind, File: src.file, Line: src.doc.line(path), Path: path,
		Message: fmt.Sprintf(format, args...), Suggestion: suggestion,
	})
}

// addWarning records w, whose Path is already absolute, located in src.
func (c *configParser) addWarning(src *source, w Warning) {
	w.File, w.Line = src.file, src.doc.line(w.Path)
	c.cfg.Warnings = append(c.cfg.Warnings, w)
}

func (c *configParser) fail(src *source, code utcp.Code, path, format string, args ...any) {
	c.failSuggest(src, code, path, "", format, args...)
}

func (c *configParser) failSuggest(src *source, code utcp.Code, path, suggestion, format string, args ...any) {
	c.errs = append(c.errs, Problem{
		Severity: SeverityError, Code: code, File: src.file, Line: src.doc.line(path), Path: path,
		Message: fmt.Sprintf(format, args...), Suggestion: suggestion,
	})
}

func (c *configParser) location(src *source, path string) string {
	return formatLocation(src.file, src.doc.line(path), path)
}

// checkFields warns about the keys of o that are neither known nor
// legacy, and about duplicate keys.
func (c *configParser) checkFields(src *source, o *object, base string, known, legacy []string) {
	for _, k := range o.keys() {
		if slices.Contains(known, k) || slices.Contains(legacy, k) {
			continue
		}
		c.warn(src, WarnUnknownField, joinKey(base, k), suggest(k, known), "unknown field %q ignored", k)
	}
	for _, k := range o.duplicates() {
		c.warn(src, WarnIgnored, joinKey(base, k), "", "field %q appears more than once; the last value is used", k)
	}
}

// object decodes raw as a JSON object, or records an error.
func (c *configParser) object(src *source, raw []byte, path, what string) (*object, bool) {
	if firstByte(raw) != '{' {
		c.fail(src, utcp.CodeInvalidConfig, path, "%s must be a JSON object, got %s", what, jsonKind(raw))
		return nil, false
	}
	o, err := parseObject(raw)
	if err != nil {
		c.fail(src, utcp.CodeInvalidConfig, path, "%v", err)
		return nil, false
	}
	return o, true
}

func (c *configParser) finish() (*Config, error) {
	if c.opts.Strict {
		for _, w := range c.cfg.Warnings {
			if w.StrictError() {
				c.errs = append(c.errs, problemFromWarning(w, true))
			}
		}
	}
	if len(c.errs) > 0 {
		sortProblems(c.errs)
		return nil, problemsError(c.errs)
	}
	return c.cfg, nil
}

// top parses the top-level object of a configuration and returns its
// templates.
func (c *configParser) top(src *source, data []byte) []rawTemplate {
	o, ok := c.object(src, data, "", "a configuration")
	if !ok {
		return nil
	}
	if isManualObject(o) && !o.has("manual_call_templates") && !o.has("providers") {
		c.fail(src, utcp.CodeInvalidConfig, "", "this is a UTCP manual, not a client configuration; point a file call template at it from manual_call_templates")
		return nil
	}
	c.checkFields(src, o, "", configFields, configLegacyFields)
	var raws []rawTemplate
	if v, ok := o.get("variables"); ok {
		c.variables(src, v)
	}
	if v, ok := o.get("load_variables_from"); ok {
		c.loaders(src, v)
	}
	if v, ok := o.get("tool_repository"); ok {
		c.repository(src, v)
	}
	if v, ok := o.get("tool_search_strategy"); ok {
		c.searchStrategy(src, v)
	}
	if v, ok := o.get("post_processing"); ok {
		c.postProcessing(src, v)
	}
	if v, ok := o.get("gateway"); ok && !isNull(v) {
		c.cfg.Gateway = append(json.RawMessage(nil), bytes.TrimSpace(v)...)
	}
	if v, ok := o.get("manual_call_templates"); ok {
		raws = append(raws, c.templateList(src, v, "manual_call_templates")...)
	}
	if v, ok := o.get("providers"); ok {
		c.warn(src, WarnLegacy, "providers", "", "legacy field providers read as manual_call_templates")
		raws = append(raws, c.templateList(src, v, "providers")...)
	}
	if v, ok := o.get("providers_file_path"); ok && !isNull(v) {
		raws = append(raws, c.providersFile(src, v)...)
	}
	return raws
}

// templateList splits an array of templates.
func (c *configParser) templateList(src *source, raw []byte, path string) []rawTemplate {
	if isNull(raw) {
		return nil
	}
	items, err := decodeArray(raw)
	if err != nil {
		c.fail(src, utcp.CodeInvalidConfig, path, "must be an array of call templates, got %s", jsonKind(raw))
		return nil
	}
	out := make([]rawTemplate, len(items))
	for i, it := range items {
		out[i] = rawTemplate{src: src, path: joinIndex(path, i), raw: it}
	}
	return out
}

// providersFile reads the legacy providers_file_path: a JSON (or YAML)
// file holding an array of providers, or an object with a providers or
// manual_call_templates array, or a single provider.
func (c *configParser) providersFile(src *source, raw []byte) []rawTemplate {
	const key = "providers_file_path"
	p, ok := decodeString(raw)
	if !ok || p == "" {
		c.fail(src, utcp.CodeInvalidConfig, key, "must be a non-empty string, got %s", jsonKind(raw))
		return nil
	}
	c.warn(src, WarnLegacy, key, "", "legacy field providers_file_path: its providers are read as manual_call_templates")
	file := p
	if !filepath.IsAbs(file) && src.dir != "" {
		file = filepath.Join(src.dir, file)
	}
	data, err := c.opts.readFile(file)
	if err != nil {
		c.fail(src, utcp.CodeInvalidConfig, key, "cannot read providers file %s: %v", file, err)
		return nil
	}
	doc, err := loadDocument(file, data, utcp.CodeInvalidConfig, isYAMLName(file), true)
	if err != nil {
		c.errs = append(c.errs, Problem{Severity: SeverityError, Code: utcp.CodeInvalidConfig, File: src.file,
			Line: src.doc.line(key), Path: key, Message: err.Error()})
		return nil
	}
	dir := src.dir
	if filepath.IsAbs(file) {
		dir = filepath.Dir(file)
	}
	psrc := c.source(file, dir, doc)
	switch firstByte(doc.json) {
	case '[':
		return c.templateList(psrc, doc.json, "")
	case '{':
		o, ok := c.object(psrc, doc.json, "", "a providers file")
		if !ok {
			return nil
		}
		for _, k := range []string{"manual_call_templates", "providers"} {
			if v, ok := o.get(k); ok {
				return c.templateList(psrc, v, k)
			}
		}
		if o.has("call_template_type") || o.has("provider_type") {
			return []rawTemplate{{src: psrc, path: "", raw: doc.json}}
		}
	}
	c.fail(psrc, utcp.CodeInvalidConfig, "", "a providers file must hold a JSON array of providers, got %s", jsonKind(doc.json))
	return nil
}

func (c *configParser) variables(src *source, raw []byte) {
	if isNull(raw) {
		return
	}
	o, ok := c.object(src, raw, "variables", "variables")
	if !ok {
		return
	}
	for _, k := range o.duplicates() {
		c.warn(src, WarnIgnored, joinKey("variables", k), "", "variable %q appears more than once; the last value is used", k)
	}
	for _, m := range o.members {
		s, ok := decodeScalarString(m.val)
		if !ok {
			c.fail(src, utcp.CodeInvalidConfig, joinKey("variables", m.key), "a variable must be a string, got %s", jsonKind(m.val))
			continue
		}
		c.cfg.Variables[m.key] = s
	}
}

func (c *configParser) loaders(src *source, raw []byte) {
	const base = "load_variables_from"
	if isNull(raw) {
		return
	}
	items, err := decodeArray(raw)
	if err != nil {
		c.fail(src, utcp.CodeInvalidConfig, base, "must be an array of variable loaders, got %s", jsonKind(raw))
		return
	}
	for i, it := range items {
		path := joinIndex(base, i)
		o, ok := c.object(src, it, path, "a variable loader")
		if !ok {
			continue
		}
		c.checkFields(src, o, path, loaderFields, loaderLegacyFields)
		l := Loader{File: src.file, Line: src.doc.line(path), Path: path, Location: c.location(src, path)}
		typeKey := "variable_loader_type"
		v, ok := o.get(typeKey)
		if !ok {
			if v, ok = o.get("type"); ok {
				typeKey = "type"
				c.warn(src, WarnLegacy, joinKey(path, "type"), "", "legacy field type read as variable_loader_type")
			}
		} else if o.has("type") {
			c.warn(src, WarnIgnored, joinKey(path, "type"), "", "legacy field type ignored: variable_loader_type is set")
		}
		if !ok {
			c.fail(src, utcp.CodeInvalidConfig, joinKey(path, "variable_loader_type"), "is required (valid: dotenv)")
			continue
		}
		l.Type, ok = decodeString(v)
		if !ok || l.Type != "dotenv" {
			c.failSuggest(src, utcp.CodeInvalidConfig, joinKey(path, typeKey), suggest(l.Type, []string{"dotenv"}),
				"unknown variable loader type %s (valid: dotenv)", bytes.TrimSpace(v))
			continue
		}
		v, ok = o.get("env_file_path")
		if l.EnvFilePath, _ = decodeString(v); !ok || l.EnvFilePath == "" {
			c.fail(src, utcp.CodeInvalidConfig, joinKey(path, "env_file_path"), "a dotenv loader needs env_file_path, a non-empty string")
			continue
		}
		if !filepath.IsAbs(l.EnvFilePath) && src.dir != "" {
			l.EnvFilePath = filepath.Join(src.dir, l.EnvFilePath)
		}
		if v, ok := o.get("optional"); ok && !isNull(v) {
			if err := json.Unmarshal(v, &l.Optional); err != nil {
				c.fail(src, utcp.CodeInvalidConfig, joinKey(path, "optional"), "must be a boolean, got %s", jsonKind(v))
				continue
			}
		}
		c.cfg.Loaders = append(c.cfg.Loaders, l)
	}
}

func (c *configParser) repository(src *source, raw []byte) {
	const base = "tool_repository"
	if isNull(raw) {
		return
	}
	o, ok := c.object(src, raw, base, base)
	if !ok {
		return
	}
	r := ToolRepository{Type: DefaultToolRepositoryType, Raw: append(json.RawMessage(nil), bytes.TrimSpace(raw)...)}
	if !c.typed(src, o, base, "tool_repository_type", &r.Type, repositoryFields) {
		return
	}
	c.cfg.ToolRepository = r
}

func (c *configParser) searchStrategy(src *source, raw []byte) {
	const base = "tool_search_strategy"
	if isNull(raw) {
		return
	}
	o, ok := c.object(src, raw, base, base)
	if !ok {
		return
	}
	s := SearchStrategy{Type: DefaultSearchStrategyType, TagWeight: DefaultTagWeight, DescriptionWeight: DefaultDescriptionWeight,
		Raw: append(json.RawMessage(nil), bytes.TrimSpace(raw)...)}
	if !c.typed(src, o, base, "tool_search_strategy_type", &s.Type, searchStrategyFields) {
		return
	}
	for _, f := range []struct {
		key string
		dst *float64
	}{{"tag_weight", &s.TagWeight}, {"description_weight", &s.DescriptionWeight}} {
		if v, ok := o.get(f.key); ok && !isNull(v) {
			if err := json.Unmarshal(v, f.dst); err != nil {
				c.fail(src, utcp.CodeInvalidConfig, joinKey(base, f.key), "must be a number, got %s", jsonKind(v))
				return
			}
		}
	}
	c.cfg.SearchStrategy = s
}

// typed reads the discriminator typeKey of a section whose known types
// and their fields are in fields. An unknown type is kept with a
// WarnUnknownValue warning; a known one has its fields checked.
func (c *configParser) typed(src *source, o *object, base, typeKey string, dst *string, fields map[string][]string) bool {
	if v, ok := o.get(typeKey); ok && !isNull(v) {
		s, ok := decodeString(v)
		if !ok {
			c.fail(src, utcp.CodeInvalidConfig, joinKey(base, typeKey), "must be a string, got %s", jsonKind(v))
			return false
		}
		*dst = s
	}
	known, ok := fields[*dst]
	if !ok {
		c.warn(src, WarnUnknownValue, joinKey(base, typeKey), suggest(*dst, sortedKeys(fields)),
			"unknown %s %q (known: %s); kept as written", typeKey, *dst, strings.Join(sortedKeys(fields), ", "))
		return true
	}
	c.checkFields(src, o, base, known, nil)
	return true
}

func (c *configParser) postProcessing(src *source, raw []byte) {
	const base = "post_processing"
	if isNull(raw) {
		return
	}
	items, err := decodeArray(raw)
	if err != nil {
		c.fail(src, utcp.CodeInvalidConfig, base, "must be an array of post-processors, got %s", jsonKind(raw))
		return
	}
	for i, it := range items {
		path := joinIndex(base, i)
		o, ok := c.object(src, it, path, "a post-processor")
		if !ok {
			continue
		}
		tp := joinKey(path, "tool_post_processor_type")
		v, ok := o.get("tool_post_processor_type")
		if !ok || isNull(v) {
			c.fail(src, utcp.CodeInvalidConfig, tp, "is required (valid: %s, %s)", FilterDictType, LimitStringsType)
			continue
		}
		typ, _ := decodeString(v)
		known, ok := postProcessorFields[typ]
		if !ok {
			c.failSuggest(src, utcp.CodeInvalidConfig, tp, suggest(typ, sortedKeys(postProcessorFields)),
				"unknown tool_post_processor_type %s (valid: %s, %s)", bytes.TrimSpace(v), FilterDictType, LimitStringsType)
			continue
		}
		c.checkFields(src, o, path, known, nil)
		pp, err := decodePostProcessor(typ, it)
		if err != nil {
			c.fail(src, utcp.CodeInvalidConfig, path, "%v", err)
			continue
		}
		c.cfg.PostProcessors = append(c.cfg.PostProcessors, pp)
	}
}

// prepared is a template on its way into Config.ManualCallTemplates.
type prepared struct {
	rt      rawTemplate
	idx     int // position among the templates, for generated names
	o       *object
	typ     string
	name    string // as written; "" when missing
	changed bool
	final   string
	// errs are the errors of the template's transport (collect mode):
	// the template is rejected.
	errs []Problem
}

// templates normalises every template, checks its fields, and gives
// each a unique name. In collect mode a template its transport refuses
// goes to Rejected instead of ManualCallTemplates.
func (c *configParser) templates(raws []rawTemplate) {
	var ps []*prepared
	for i, rt := range raws {
		p := &prepared{rt: rt, idx: i}
		o, ok := c.object(rt.src, rt.raw, rt.path, "a call template")
		if !ok {
			continue
		}
		p.o = o
		ws, issues, changed := prepareObject(o, rt.src.dir)
		p.changed = changed
		for _, w := range ws {
			w.Path = joinPath(rt.path, w.Path)
			c.addWarning(rt.src, w)
		}
		p.typ, _ = decodeString(mustGet(o, "call_template_type"))
		if v, ok := o.get("name"); ok {
			p.name, _ = decodeString(v)
		}
		if len(issues) > 0 {
			for _, is := range issues {
				c.failSuggest(rt.src, utcp.CodeInvalidConfig, joinPath(rt.path, is.path), is.suggestion, "%s", is.msg)
			}
			if is := issues[0]; is.guess != nil {
				// A misspelled call_template_type key: the rest of the
				// template is checked as if it were spelled right.
				c.errs = append(c.errs, c.guessProblems(rt, is.guess)...)
			}
			continue
		}
		c.unknownTemplateFields(rt, o, p.typ)
		ps = append(ps, p)
	}

	// Names: explicit ones first (sanitised), then generated ones that
	// avoid them.
	taken := map[string]*prepared{}
	for _, p := range ps {
		if p.name == "" {
			continue
		}
		p.final = utcp.SanitizeName(p.name)
		if q, dup := taken[p.final]; dup {
			c.fail(p.rt.src, utcp.CodeManualExists, joinKey(p.rt.path, "name"),
				"manual name %q (written %q) is already used by %s (written %q); manual names must be unique after sanitising",
				p.final, p.name, c.location(q.rt.src, q.rt.path), q.name)
			continue
		}
		taken[p.final] = p
		if p.final != p.name {
			c.warn(p.rt.src, WarnNotice, joinKey(p.rt.path, "name"), "", "manual name %q sanitised to %q", p.name, p.final)
		}
	}
	for _, p := range ps {
		if p.name != "" {
			continue
		}
		base := utcp.SanitizeName(p.typ)
		cand := fmt.Sprintf("%s_%d", base, p.idx+1)
		for n := 2; taken[cand] != nil; n++ {
			cand = fmt.Sprintf("%s_%d_%d", base, p.idx+1, n)
		}
		p.final = cand
		taken[cand] = p
		c.warn(p.rt.src, WarnNotice, p.rt.path, "", "manual call template has no name; named %q", cand)
	}
	for _, p := range ps {
		if taken[p.final] != p {
			continue // a duplicate, already reported
		}
		if p.final != p.name {
			p.o.set("name", appendJSONString(nil, p.final))
			p.changed = true
		}
		var raw json.RawMessage
		if p.changed {
			raw = p.o.encode()
		} else {
			var b bytes.Buffer
			if json.Compact(&b, p.rt.raw) != nil {
				b.Write(p.rt.raw)
			}
			raw = b.Bytes()
		}
		line := p.rt.src.doc.line(p.rt.path)
		t := Template{
			Raw: raw, Name: p.final, Type: p.typ,
			File: p.rt.src.file, Line: line, Path: p.rt.path,
			Location: formatLocation(p.rt.src.file, line, p.rt.path),
		}
		if c.collect && p.errs == nil {
			p.errs = c.parseTemplate(t)
		}
		if p.errs != nil {
			c.reject(t, p.errs)
			continue
		}
		c.cfg.ManualCallTemplates = append(c.cfg.ManualCallTemplates, t)
	}
}

// reject sets t aside with its errors (collect mode).
func (c *configParser) reject(t Template, errs []Problem) {
	for i := range errs {
		errs[i].Manual = t.Name
	}
	c.cfg.Rejected = append(c.cfg.Rejected, Rejected{Template: t, Problems: errs})
}

// parseTemplate parses t with the parser (collect mode) as Validate
// does: a template the parser refuses is an error, with a "did you mean"
// for an unknown call_template_type (and, when one is close, the rest of
// the template checked as that type); an unknown allowed protocol is a
// warning.
func (c *configParser) parseTemplate(t Template) []Problem {
	p := c.opts.Parser
	if p == nil {
		return nil
	}
	ct, err := p.ParseTemplate(t.Raw)
	if err != nil {
		pr := Problem{Severity: SeverityError, Code: utcp.CodeOf(err), File: t.File, Line: t.Line, Path: t.Path,
			Message: fmt.Sprintf("manual %s: %v", t.Name, err)}
		out := []Problem{pr}
		if types := parserTypes(p); types != nil && !slices.Contains(types, t.Type) {
			out[0].Path = joinKey(t.Path, "call_template_type")
			out[0].Line = c.cfg.line(t.File, out[0].Path)
			if typ := suggest(t.Type, types); typ != "" {
				out[0].Suggestion = typ
				o, _ := parseObject(t.Raw)
				o.set("call_template_type", appendJSONString(nil, typ))
				out = append(out, c.guessProblems(rawTemplate{src: &source{file: t.File, doc: c.cfg.docs[t.File]}, path: t.Path}, o)...)
			}
		}
		return out
	}
	if types := parserTypes(p); types != nil {
		for i, proto := range ct.AllowedCommunicationProtocols {
			if !slices.Contains(types, proto) {
				path := joinIndex(joinKey(t.Path, "allowed_communication_protocols"), i)
				c.cfg.Warnings = append(c.cfg.Warnings, Warning{Kind: WarnUnknownValue, File: t.File, Line: c.cfg.line(t.File, path), Path: path,
					Message:    fmt.Sprintf("unknown call_template_type %q in allowed_communication_protocols (known: %s)", proto, strings.Join(types, ", ")),
					Suggestion: suggest(proto, types)})
			}
		}
	}
	return nil
}

// guessProblems checks the template o (a copy of rt's, its type
// corrected as a "did you mean" suggests) with the parser, so that a
// misspelled type does not hide the template's other problems: the
// parser's refusal is returned as an error of the rejected template, the
// unknown fields are warnings as in any template.
func (c *configParser) guessProblems(rt rawTemplate, o *object) []Problem {
	p := c.opts.Parser
	if p == nil || !c.collect {
		return nil
	}
	typ, _ := decodeString(mustGet(o, "call_template_type"))
	ct, err := p.ParseTemplate(o.encode())
	line := rt.src.doc.line(rt.path)
	if err != nil {
		return []Problem{{Severity: SeverityError, Code: utcp.CodeOf(err), File: rt.src.file, Line: line, Path: rt.path,
			Message: fmt.Sprintf("read as call_template_type %q, the template still fails: %v", typ, err)}}
	}
	known := parserFields(p, typ)
	for _, k := range ct.Unknown {
		c.warn(rt.src, WarnUnknownField, joinKey(rt.path, k), suggest(k, known), "unknown field %q for call_template_type %q ignored", k, typ)
	}
	return nil
}

// parserTypes returns the types p knows when it is a TypeLister, else nil.
func parserTypes(p TemplateParser) []string {
	if tl, ok := p.(TypeLister); ok {
		return tl.Types()
	}
	return nil
}

func mustGet(o *object, key string) json.RawMessage {
	v, _ := o.get(key)
	return v
}

// unknownTemplateFields warns about the fields of a template that its
// transport does not know (c.opts.Parser's CallTemplate.Unknown; none
// without a parser) and about fields written twice. A template the
// parser rejects gets no warning here: Validate reports it.
func (c *configParser) unknownTemplateFields(rt rawTemplate, o *object, typ string) {
	if p := c.opts.Parser; p != nil {
		ct, err := p.ParseTemplate(o.encode())
		if err != nil {
			return
		}
		known := parserFields(p, typ)
		for _, k := range ct.Unknown {
			c.warn(rt.src, WarnUnknownField, joinKey(rt.path, k), suggest(k, known), "unknown field %q ignored", k)
		}
	}
	for _, k := range o.duplicates() {
		c.warn(rt.src, WarnIgnored, joinKey(rt.path, k), "", "field %q appears more than once; the last value is used", k)
	}
}

// issue is a problem with one field of a template, relative to it.
type issue struct {
	path       string
	msg        string
	suggestion string
	// guess, for a misspelled call_template_type key, is the template
	// with the key spelled right.
	guess *object
}

// prepareObject normalises a template object in place, checks its type
// and name fields, and makes a relative file_path absolute against dir
// (when dir is not ""). Paths in the results are relative to the template.
func prepareObject(o *object, dir string) (ws []Warning, issues []issue, changed bool) {
	ws, changed = normalizeTemplate(o)
	v, ok := o.get("call_template_type")
	switch typ, isString := decodeString(v); {
	case !ok || isNull(v):
		issues = append(issues, missingType(o))
	case !isString || typ == "":
		issues = append(issues, issue{path: "call_template_type", msg: fmt.Sprintf("must be a non-empty string, got %s", jsonKind(v))})
	case typ == "file":
		fp, isString := decodeString(mustGet(o, "file_path"))
		if isString && fp != "" && dir != "" && !filepath.IsAbs(fp) && !strings.HasPrefix(fp, "$") {
			abs := filepath.Join(dir, fp)
			o.set("file_path", appendJSONString(nil, abs))
			changed = true
			ws = append(ws, Warning{Kind: WarnNotice, Path: "file_path", Message: fmt.Sprintf("relative file_path %q resolved to %q", fp, abs)})
		}
	}
	if v, ok := o.get("name"); ok && !isNull(v) {
		if _, isString := decodeString(v); !isString {
			issues = append(issues, issue{path: "name", msg: fmt.Sprintf("must be a string, got %s", jsonKind(v))})
		}
	}
	return ws, issues, changed
}

// missingType is the issue of a template without call_template_type: a
// key close to it (or to a legacy name of it) is named as the likely
// misspelling, with the template as it would read spelled right.
func missingType(o *object) issue {
	is := issue{path: "call_template_type", msg: "a call template needs call_template_type"}
	names := append([]string{"call_template_type"}, legacyTypeKeys...)
	for _, k := range o.keys() {
		if slices.Contains(names, k) {
			continue
		}
		near := utcp.Closest(k, names, 1)
		if len(near) == 0 || near[0] == "type" || near[0] == "transport" {
			continue // short names are close to too much
		}
		is.path = k
		is.msg = fmt.Sprintf("a call template needs call_template_type; %q is not a field", k)
		is.suggestion = "call_template_type"
		if v, _ := o.get(k); !isNull(v) {
			g, err := parseObject(o.encode())
			if err == nil {
				g.rename(k, "call_template_type")
				normalizeTemplate(g)
				if typ, ok := decodeString(mustGet(g, "call_template_type")); ok && typ != "" {
					is.guess = g
				}
			}
		}
		break
	}
	return is
}

// PrepareTemplate readies one manual call template that does not come
// from a configuration file (an admin API request, a manuals folder): it
// normalises raw with NormalizeTemplate, requires call_template_type and
// a non-empty name, sanitises the name with utcp.SanitizeName (writing it
// into the result's Raw, with a WarnNotice), and makes a relative
// file_path of a file template absolute against baseDir when baseDir is
// not "". Warning paths are relative to the template. Failures are
// invalid_template errors naming the field.
func PrepareTemplate(raw json.RawMessage, baseDir string) (Template, []Warning, error) {
	if firstByte(raw) != '{' {
		return Template{}, nil, utcp.NewError(utcp.CodeInvalidTemplate, "a call template must be a JSON object, got %s", jsonKind(raw))
	}
	o, err := parseObject(raw)
	if err != nil {
		return Template{}, nil, utcp.Errorf(utcp.CodeInvalidTemplate, "call template is not a JSON object: %w", err)
	}
	ws, issues, changed := prepareObject(o, baseDir)
	name, _ := decodeString(mustGet(o, "name"))
	if len(issues) == 0 && name == "" {
		issues = append(issues, issue{path: "name", msg: "a manual call template needs a non-empty name"})
	}
	if len(issues) > 0 {
		msgs := make([]string, len(issues))
		for i, is := range issues {
			msgs[i] = formatFinding("", 0, is.path, is.msg, is.suggestion)
		}
		return Template{}, ws, utcp.NewError(utcp.CodeInvalidTemplate, "%s", strings.Join(msgs, "; ")).WithDetail("path", issues[0].path)
	}
	t := Template{Name: utcp.SanitizeName(name)}
	t.Type, _ = decodeString(mustGet(o, "call_template_type"))
	if t.Name != name {
		o.set("name", appendJSONString(nil, t.Name))
		changed = true
		ws = append(ws, Warning{Kind: WarnNotice, Path: "name", Message: fmt.Sprintf("manual name %q sanitised to %q", name, t.Name)})
	}
	if changed {
		t.Raw = o.encode()
	} else {
		var b bytes.Buffer
		if json.Compact(&b, raw) != nil {
			b.Write(raw)
		}
		t.Raw = b.Bytes()
	}
	return t, ws, nil
}
