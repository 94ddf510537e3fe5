package graphql

// Document returns the document a call of tool of manual sends, as
// discovery stored it, or "" when there is none.
func (t *Transport) Document(manual, tool string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if st := t.manuals[manual]; st != nil {
		for _, ops := range st.ops {
			if op := ops[tool]; op != nil {
				return op.document
			}
		}
	}
	return ""
}
