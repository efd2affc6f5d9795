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
	subject_domain_allowed(role)
}

# subject_domain_allowed: a role without subjectDomains applies to callers of every
# domain; one with them only to a caller whose domain (input.subject.domainName,
# from its DN) is listed, compared without regard to case. A caller without a
# domain (a DN without DC components) is in none.
subject_domain_allowed(role) if not "subjectDomains" in object.keys(role)

subject_domain_allowed(role) if role.subjectDomains == []

subject_domain_allowed(role) if {
	some name in role.subjectDomains
	name != ""
	lower(name) == lower(input.subject.domainName)
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

# in_scope: {"domain": name} covers the objects of that domain: those whose
# domainName (the DNS name from the DC components of their DN) is name, compared
# without regard to case. An object without a domain name is in no domain scope.
in_scope(scope) if {
	scope.domain != ""
	lower(input.object.domainName) == lower(scope.domain)
}

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

# data_errors names each mistake in data.dirgate.roles that would make a role grant
# other than its author meant: a key or scope kind the policy does not know (a
# misspelt "subjectDomains" would otherwise let the role apply to callers of every
# domain), or a domain name that no domainName can equal. dirgate refuses to load
# a policy whose data_errors is not empty, and keeps the last good one on a reload
# (docs/policy.md, "The bundled policy: security roles").
data_errors contains "data.dirgate.roles must be an array of roles" if {
	roles := data.dirgate.roles
	not is_array(roles)
}

data_errors contains sprintf("%s must be an object", [role_label(i)]) if {
	some i, role in data.dirgate.roles
	not is_object(role)
}

data_errors contains sprintf("%s: unknown key %q (known: %s)", [role_label(i), key, concat(", ", sort(role_keys))]) if {
	some i, role in data.dirgate.roles
	is_object(role)
	some key, _ in role
	not key in role_keys
}

data_errors contains sprintf("%s: subjectDomains must be an array of domain names", [role_label(i)]) if {
	some i, role in data.dirgate.roles
	not is_array(object.get(role, "subjectDomains", []))
}

data_errors contains sprintf("%s: subjectDomains[%d] %s", [role_label(i), j, domain_name_error(name)]) if {
	some i, role in data.dirgate.roles
	some j, name in object.get(role, "subjectDomains", [])
	not valid_domain_name(name)
}

data_errors contains sprintf("%s: scopes[%d] has the unknown kind %q (known: %s)", [role_label(i), j, kind, concat(", ", sort(scope_kinds))]) if {
	some i, role in data.dirgate.roles
	some j, scope in role.scopes
	is_object(scope)
	some kind, _ in scope
	not kind in scope_kinds
}

data_errors contains sprintf("%s: scopes[%d].domain %s", [role_label(i), j, domain_name_error(scope.domain)]) if {
	some i, role in data.dirgate.roles
	some j, scope in role.scopes
	"domain" in object.keys(scope)
	not valid_domain_name(scope.domain)
}

role_keys := {"name", "description", "trustees", "permissions", "scopes", "objectTypes", "properties", "subjectDomains"}

scope_kinds := {"all", "subtree", "membersOf", "domain"}

role_label(i) := sprintf("role %q (roles[%d])", [data.dirgate.roles[i].name, i]) if is_string(data.dirgate.roles[i].name)

else := sprintf("roles[%d]", [i])

# valid_domain_name: a DNS name as domainName spells one, labels joined by dots:
# not empty, without a leading or trailing dot, an empty label, white space, or
# the "=" and "," of a DN (DC=corp,DC=example,DC=com is written corp.example.com).
valid_domain_name(name) if regex.match(`^[^.\s,=]+(\.[^.\s,=]+)*$`, name)

domain_name_error(name) := sprintf("must be a domain's DNS name such as \"corp.example.com\", not %s", [json.marshal(name)])
