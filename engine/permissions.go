package engine

// Permissions returns the permissions this view holds on ns: every one for
// the DB as opened (none in secure mode, where calls need a caller), the
// Authorizer's grant for a caller's view, none for a view whose calls all
// fail. It lets a program show a caller only what it may do (the
// dashboard hides the actions a read-only caller cannot take); each call
// still checks for itself.
func (d *DB) Permissions(ns Namespace) Perm {
	if d.bad != nil {
		return 0
	}
	if d.caller == nil {
		if d.c.opts.Secure {
			return 0
		}
		return PermAll
	}
	return d.c.opts.Authorizer.Allowed(*d.caller, ns, PermAll)
}
