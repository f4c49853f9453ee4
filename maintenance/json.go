package maintenance

// nonNil makes an empty list [] in JSON rather than null: the lists of the
// output documents are iterated by their consumers, who should not have to
// tell "none" from "missing".
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
