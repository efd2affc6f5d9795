# Package dirgate.authz is dirgate's bundled policy: security roles read from data
# decide, object by object, what each caller may view and remove. docs/policy.md
# describes the contract (input, decision) and the shape of data.dirgate.roles.
#
# The policy leaves allow undefined rather than declaring `default allow := false`:
# an undefined decision denies, and without a default dirgate can fold the caller's
# roles into a fast per-object check (docs/policy.md, "Performance").
package dirgate.authz

# allow: the caller holds a role that grants input.action over input.object.
allow if {
	some role in granted
	some scope in role.scopes
	in_scope(scope)
	type_allowed(role)
}

# reasons names what grants input.action over input.object: each role that does,
# with the scope that covers the object. dirgate's decisions API shows them
# (docs/policy.md, "The decisions API"); they never change a decision.
reasons contains sprintf("role %s, scope %s", [role.name, json.marshal(scope)]) if {
	some role in granted
	some scope in role.scopes
	in_scope(scope)
	type_allowed(role)
}

# properties names the attributes the caller may read on input.object when it views
# it with properties: those of every role that grants the view, a role without
# "properties" giving ["*"] (every attribute that is neither secret nor DN-valued).
# A secret attribute (LAPS passwords, BitLocker keys, anything the schema marks
# confidential, ...) or one naming other objects (memberOf, manager, ...) is
# returned only to a role that names it (docs/policy.md, "Which properties a caller
# may read").
properties contains lower(name) if {
	some role in granted
	some scope in role.scopes
	in_scope(scope)
	type_allowed(role)
	some name in object.get(role, "properties", ["*"])
}

# granted is the set of roles that give the caller the requested permission.
granted contains role if {
	some role in data.dirgate.roles
	input.action in role.permissions
	some trustee in role.trustees
	lower(trim(trustee, "{}")) in caller_ids
}

# caller_ids holds every identifier of the caller and of each group it belongs to,
# transitively, in lower case: DNs, GUIDs and SIDs alike.
caller_ids contains lower(id) if {
	some id in [input.subject.dn, input.subject.guid, input.subject.sid]
	id != ""
}

caller_ids contains lower(id) if {
	some group in input.subject.groups
	some id in [group.dn, group.guid, group.sid]
	id != ""
}

# in_scope: {"all": true} covers every object.
in_scope(scope) if scope.all == true

# in_scope: {"subtree": DN} covers the objects below that DN.
in_scope(scope) if dn_below(input.object.dn, scope.subtree)

# in_scope: {"membersOf": [group, ...]} covers the listings of those groups and the
# removals from them, each group named by DN or GUID (directory objects carry no SID).
in_scope(scope) if {
	some name in scope.membersOf
	lower(trim(name, "{}")) in group_ids
}

group_ids contains lower(id) if {
	some id in [input.group.dn, input.group.guid]
	id != ""
}

# type_allowed: a role without objectTypes covers every type of object.
type_allowed(role) if count(object.get(role, "objectTypes", [])) == 0

type_allowed(role) if input.object.objectType in role.objectTypes

# dn_below reports whether dn lies strictly below base, comparing without regard to
# letter case. The comma before base must separate RDNs: one preceded by an odd
# number of backslashes is escaped inside a name (CN=x\,OU=Staff,... is not in
# OU=Staff). DNs are compared as the directory spells them.
dn_below(dn, base) if {
	suffix := concat("", [",", lower(base)])
	endswith(lower(dn), suffix)
	not regex.match(`(^|[^\\])\\(\\\\)*$`, trim_suffix(lower(dn), suffix))
}
