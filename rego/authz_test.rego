package dirgate.authz_test

import data.dirgate.authz

# Fixtures: a caller in the help desk, nested in IT Support; objects of the demo
# organisation.

helpdesk := {
	"dn": "CN=Hugo Helpdesk,OU=IT,OU=Staff,DC=corp,DC=example,DC=com",
	"guid": "73e0a89b-84f0-4f42-8cbd-40e4e51f1673",
	"sid": "S-1-5-21-2113472910-3286130475-1853229740-1125",
	"displayName": "Hugo Helpdesk",
	"domainName": "corp.example.com",
	"groups": [
		{
			"dn": "CN=Help Desk,OU=Groups,DC=corp,DC=example,DC=com",
			"guid": "54eb12b6-fd0c-491e-88d0-8fa7ba12b04b",
			"sid": "S-1-5-21-2113472910-3286130475-1853229740-1153",
		},
		{
			"dn": "CN=IT Department,OU=Groups,DC=corp,DC=example,DC=com",
			"guid": "ff4cee22-f1ad-414f-ad9d-6a2793db8829",
			"sid": "S-1-5-21-2113472910-3286130475-1853229740-1155",
		},
		{
			"dn": "CN=Workstation Admins,OU=Groups,DC=corp,DC=example,DC=com",
			"guid": "68e35bb4-6a37-4331-b66b-0b5eaf174e00",
			"sid": "S-1-5-21-2113472910-3286130475-1853229740-1157",
		},
	],
}

admin := {
	"dn": "CN=Dana Admin,OU=IT,OU=Staff,DC=corp,DC=example,DC=com",
	"guid": "0b6f39b4-9d4c-4d4f-b1a4-1bb2d5c7e6a0",
	"sid": "",
	"displayName": "Dana Admin",
	"domainName": "corp.example.com",
	"groups": [{
		"dn": "CN=Directory Admins,OU=Groups,DC=corp,DC=example,DC=com",
		"guid": "9ada8d98-d1c6-4903-a144-0654771cd9a2",
		"sid": "S-1-5-21-2113472910-3286130475-1853229740-1156",
	}],
}

nobody := {"dn": "CN=Bella Hughes,OU=Sales,OU=Staff,DC=corp,DC=example,DC=com", "guid": "", "sid": "", "displayName": "Bella Hughes", "domainName": "corp.example.com", "groups": []}

directory_object(dn, type) := {
	"guid": "00000000-0000-0000-0000-000000000001", "dn": dn, "displayName": "x",
	"objectType": type, "objectTypeCode": 0, "domainName": "corp.example.com",
	"directoryType": 1, "properties": {},
}

user := directory_object("CN=Hazel Zhou,OU=HR,OU=Staff,DC=corp,DC=example,DC=com", "user")

computer := directory_object("CN=WS-0001,OU=Workstations,DC=corp,DC=example,DC=com", "computer")

contact := directory_object("CN=Acme Support,OU=Contacts,DC=corp,DC=example,DC=com", "contact")

it_group := directory_object("CN=Directory Admins,OU=Groups,DC=corp,DC=example,DC=com", "group")

newsletter := object.union(
	directory_object("CN=Newsletter,OU=Groups,DC=corp,DC=example,DC=com", "group"),
	{"guid": "e2fafa62-2fd5-441f-be0b-2d2f35feb898"},
)

removal_test := object.union(
	directory_object("CN=Removal Test,OU=Groups,DC=corp,DC=example,DC=com", "group"),
	{"guid": "015f70b0-0a3a-41ec-847b-dd932d60c880"},
)

finance := directory_object("CN=Finance Team,OU=Groups,DC=corp,DC=example,DC=com", "group")

request := {"includeIndirect": false, "properties": [], "sizeLimit": 0}

view(subject, obj, group) := {"action": "view", "subject": subject, "object": obj, "group": group, "request": request}

remove(subject, obj, group) := {"action": "remove", "subject": subject, "object": obj, "group": group, "request": request}

add(subject, obj, group) := {"action": "add", "subject": subject, "object": obj, "group": group, "request": request}

# The demo roles (data.json).

test_admin_views_everything if {
	every obj in [user, computer, contact, it_group] {
		authz.allow with input as view(admin, obj, finance)
	}
}

test_admin_removes_everything if {
	every obj in [user, computer, contact, it_group] {
		authz.allow with input as remove(admin, obj, finance)
	}
}

test_admin_adds_everything if {
	every obj in [user, computer, contact, it_group] {
		authz.allow with input as add(admin, obj, finance)
	}
}

test_helpdesk_adds_to_the_newsletter_and_the_removal_test_group if {
	authz.allow with input as add(helpdesk, user, newsletter)
	authz.allow with input as add(helpdesk, contact, newsletter)
	authz.allow with input as add(helpdesk, user, removal_test)
}

test_helpdesk_does_not_add_to_other_groups_or_add_groups if {
	not authz.allow with input as add(helpdesk, user, finance)
	not authz.allow with input as add(helpdesk, it_group, newsletter)
}

mixed_members := directory_object("CN=Mixed Members,OU=Groups,DC=corp,DC=example,DC=com", "group")

directory_admins := directory_object("CN=Directory Admins,OU=Groups,DC=corp,DC=example,DC=com", "group")

test_workstation_admins_add_computers_to_mixed_members_only if {
	authz.allow with input as add(helpdesk, computer, mixed_members)
	not authz.allow with input as add(helpdesk, computer, finance)
	not authz.allow with input as add(helpdesk, computer, directory_admins)
}

test_viewing_or_removing_does_not_grant_adding if {
	not authz.allow with input as add(helpdesk, user, finance)
		with data.dirgate.roles as [object.union(role(helpdesk.dn, {"all": true}, []), {"permissions": ["view", "remove"]})]
	not authz.allow with input as add(nobody, user, newsletter)
}

test_helpdesk_views_staff_users_and_workstations if {
	authz.allow with input as view(helpdesk, user, finance)
	authz.allow with input as view(helpdesk, computer, finance)
}

test_helpdesk_views_groups_through_nested_membership if {
	authz.allow with input as view(helpdesk, it_group, finance)
}

test_helpdesk_does_not_view_contacts if {
	not authz.allow with input as view(helpdesk, contact, finance)
}

test_helpdesk_does_not_view_a_user_outside_staff if {
	not authz.allow with input as view(helpdesk, directory_object("CN=Guest,CN=Users,DC=corp,DC=example,DC=com", "user"), finance)
}

test_helpdesk_removes_from_the_newsletter_by_dn if {
	authz.allow with input as remove(helpdesk, user, newsletter)
	authz.allow with input as remove(helpdesk, contact, newsletter)
}

test_helpdesk_removes_from_the_removal_test_group_by_guid if {
	authz.allow with input as remove(helpdesk, user, removal_test)
}

test_helpdesk_does_not_remove_from_other_groups if {
	not authz.allow with input as remove(helpdesk, user, finance)
}

test_helpdesk_does_not_remove_groups_from_the_newsletter if {
	not authz.allow with input as remove(helpdesk, it_group, newsletter)
}

test_workstation_admins_remove_computers_anywhere if {
	authz.allow with input as remove(helpdesk, computer, finance)
}

test_viewing_does_not_grant_removal if {
	not authz.allow with input as remove(helpdesk, directory_object("CN=Ada,OU=IT,OU=Staff,DC=corp,DC=example,DC=com", "user"), finance)
}

test_a_caller_without_roles_gets_nothing if {
	not authz.allow with input as view(nobody, user, finance)
	not authz.allow with input as remove(nobody, user, newsletter)
}

# The role mechanics, each with its own roles.

role(trustee, scope, types) := {"name": "r", "trustees": [trustee], "permissions": ["view"], "scopes": [scope], "objectTypes": types}

staff := {"subtree": "OU=Staff,DC=corp,DC=example,DC=com"}

test_trustee_by_user_dn_in_any_case if {
	authz.allow with input as view(helpdesk, user, finance)
		with data.dirgate.roles as [role("cn=HUGO HELPDESK,ou=it,ou=staff,dc=corp,dc=example,dc=com", staff, [])]
}

test_trustee_by_group_sid if {
	authz.allow with input as view(helpdesk, user, finance)
		with data.dirgate.roles as [role("S-1-5-21-2113472910-3286130475-1853229740-1153", staff, [])]
}

test_trustee_by_group_guid_in_braces if {
	authz.allow with input as view(helpdesk, user, finance)
		with data.dirgate.roles as [role("{54EB12B6-FD0C-491E-88D0-8FA7BA12B04B}", staff, [])]
}

test_empty_identifiers_match_no_trustee if {
	not authz.allow with input as view(admin, user, finance)
		with data.dirgate.roles as [role("", staff, [])]
}

test_permission_must_match_the_action if {
	not authz.allow with input as remove(helpdesk, user, finance)
		with data.dirgate.roles as [role(helpdesk.dn, {"all": true}, [])]
}

test_subtree_is_below_the_base_only if {
	not authz.allow with input as view(helpdesk, directory_object("OU=Staff,DC=corp,DC=example,DC=com", "organizationalUnit"), finance)
		with data.dirgate.roles as [role(helpdesk.dn, staff, [])]
}

test_subtree_does_not_match_a_sibling_ending_alike if {
	not authz.allow with input as view(helpdesk, directory_object("CN=x,OU=NotStaff,DC=corp,DC=example,DC=com", "user"), finance)
		with data.dirgate.roles as [role(helpdesk.dn, staff, [])]
}

test_subtree_ignores_an_escaped_comma if {
	# The CN is "x,OU=Staff" and the object sits at the domain root.
	not authz.allow with input as view(helpdesk, directory_object(`CN=x\,OU=Staff,DC=corp,DC=example,DC=com`, "user"), finance)
		with data.dirgate.roles as [role(helpdesk.dn, staff, [])]
}

test_subtree_accepts_an_escaped_backslash_before_the_separator if {
	# The CN is "x\" and the object is in OU=Staff.
	authz.allow with input as view(helpdesk, directory_object(`CN=x\\,OU=Staff,DC=corp,DC=example,DC=com`, "user"), finance)
		with data.dirgate.roles as [role(helpdesk.dn, staff, [])]
}

test_members_of_scope_is_the_listed_group if {
	authz.allow with input as view(helpdesk, contact, newsletter)
		with data.dirgate.roles as [role(helpdesk.dn, {"membersOf": ["cn=newsletter,ou=groups,dc=corp,dc=example,dc=com"]}, [])]
	not authz.allow with input as view(helpdesk, contact, finance)
		with data.dirgate.roles as [role(helpdesk.dn, {"membersOf": ["cn=newsletter,ou=groups,dc=corp,dc=example,dc=com"]}, [])]
}

test_object_types_limit_a_role if {
	authz.allow with input as view(helpdesk, user, finance)
		with data.dirgate.roles as [role(helpdesk.dn, {"all": true}, ["user"])]
	not authz.allow with input as view(helpdesk, computer, finance)
		with data.dirgate.roles as [role(helpdesk.dn, {"all": true}, ["user"])]
}

test_no_roles_no_access if {
	not authz.allow with input as view(admin, user, finance) with data.dirgate.roles as []
}

# explain: the caller may see the explored principal's decisions (the decisions API).
explain(subject, explored, group) := {"action": "explain", "subject": subject, "object": explored, "group": group, "request": request}

test_admin_explains_anyone if {
	authz.allow with input as explain(admin, helpdesk, mixed_members)
}

test_helpdesk_does_not_explain if {
	not authz.allow with input as explain(helpdesk, admin, mixed_members)
	not authz.allow with input as explain(helpdesk, helpdesk, mixed_members)
}

test_reasons_name_the_role_and_scope if {
	r := authz.reasons with input as view(helpdesk, computer, finance)
	r == {`role help-desk-people, scope {"subtree":"OU=Workstations,DC=corp,DC=example,DC=com"}`}
}

test_no_reasons_when_denied if {
	count(authz.reasons) == 0 with input as view(helpdesk, contact, finance)
}

# The property rule: the help desk reads every attribute that is not secret of
# what it views ("*"), the directory admins also the LAPS passwords they name;
# a caller that may not view an object reads nothing of it.

test_helpdesk_reads_public_properties_of_what_it_views if {
	authz.properties == {"*"} with input as view(helpdesk, computer, finance)
}

test_admin_names_the_laps_and_linked_attributes if {
	authz.properties == {
		"*", "ms-mcs-admpwd", "mslaps-password",
		"member", "memberof", "manager", "directreports", "managedby", "managedobjects",
		"primarygroupid", "ms-ds-creatorsid",
	} with input as view(admin, computer, finance)
}

# The help desk views users and groups, but not every object their memberOf or
# manager names: its roles name no attribute that names other objects, so "*" alone
# leaves them out.
test_helpdesk_reads_no_linked_attributes if {
	not "memberof" in authz.properties with input as view(helpdesk, user, finance)
	not "manager" in authz.properties with input as view(helpdesk, user, finance)
}

test_no_properties_without_the_view if {
	authz.properties == set() with input as view(nobody, computer, finance)
	authz.properties == set() with input as view(helpdesk, contact, finance)
}

test_a_role_names_its_properties if {
	roles := [{
		"name": "laps-readers", "trustees": ["CN=Help Desk,OU=Groups,DC=corp,DC=example,DC=com"],
		"permissions": ["view"], "scopes": [{"subtree": "OU=Workstations,DC=corp,DC=example,DC=com"}],
		"objectTypes": ["computer"], "properties": ["ms-Mcs-AdmPwd"],
	}]
	authz.properties == {"ms-mcs-admpwd"} with input as view(helpdesk, computer, finance) with data.dirgate.roles as roles
	authz.properties == set() with input as view(helpdesk, user, finance) with data.dirgate.roles as roles
}

# Domains: a scope naming a domain, and roles limited to the callers of some domains.

fabrikam_user := object.union(
	directory_object("CN=Fiona Berg,OU=Staff,DC=fabrikam,DC=example,DC=net", "user"),
	{"domainName": "fabrikam.example.net"},
)

# A caller of FABRIKAM, in its own domain's help desk.
fabrikam_caller := {
	"dn": "CN=Frank Olsen,OU=IT,DC=fabrikam,DC=example,DC=net", "guid": "", "sid": "",
	"displayName": "Frank Olsen", "domainName": "fabrikam.example.net",
	"groups": [{"dn": "CN=Help Desk,OU=Groups,DC=fabrikam,DC=example,DC=net", "guid": "", "sid": ""}],
}

fabrikam_helpdesk := "CN=Help Desk,OU=Groups,DC=fabrikam,DC=example,DC=net"

test_domain_scope_covers_the_objects_of_that_domain if {
	roles := [role(helpdesk.dn, {"domain": "fabrikam.example.net"}, [])]
	authz.allow with input as view(helpdesk, fabrikam_user, finance) with data.dirgate.roles as roles
	not authz.allow with input as view(helpdesk, user, finance) with data.dirgate.roles as roles
}

test_domain_scope_ignores_letter_case if {
	authz.allow with input as view(helpdesk, fabrikam_user, finance)
		with data.dirgate.roles as [role(helpdesk.dn, {"domain": "FABRIKAM.Example.NET"}, [])]
	authz.allow with input as view(helpdesk, object.union(fabrikam_user, {"domainName": "Fabrikam.EXAMPLE.net"}), finance)
		with data.dirgate.roles as [role(helpdesk.dn, {"domain": "fabrikam.example.net"}, [])]
}

test_domain_scope_is_the_whole_name if {
	roles := [role(helpdesk.dn, {"domain": "example.net"}, [])]
	not authz.allow with input as view(helpdesk, fabrikam_user, finance) with data.dirgate.roles as roles
	not authz.allow with input as view(helpdesk, object.union(fabrikam_user, {"domainName": "sub.fabrikam.example.net"}), finance)
		with data.dirgate.roles as [role(helpdesk.dn, {"domain": "fabrikam.example.net"}, [])]
}

test_an_object_without_a_domain_is_in_no_domain_scope if {
	not authz.allow with input as view(helpdesk, object.union(user, {"domainName": ""}), finance)
		with data.dirgate.roles as [role(helpdesk.dn, {"domain": ""}, [])]
	not authz.allow with input as view(helpdesk, object.remove(user, ["domainName"]), finance)
		with data.dirgate.roles as [role(helpdesk.dn, {"domain": "corp.example.com"}, [])]
}

test_domain_scope_with_object_types_and_removal if {
	roles := [object.union(role(helpdesk.dn, {"domain": "fabrikam.example.net"}, ["user"]), {"permissions": ["remove"]})]
	authz.allow with input as remove(helpdesk, fabrikam_user, newsletter) with data.dirgate.roles as roles
	not authz.allow with input as view(helpdesk, fabrikam_user, newsletter) with data.dirgate.roles as roles
	not authz.allow with input as remove(helpdesk, object.union(fabrikam_user, {"objectType": "computer"}), newsletter)
		with data.dirgate.roles as roles
}

domain_role(trustee, domains) := object.union(role(trustee, {"all": true}, []), {"subjectDomains": domains})

test_subject_domains_limit_a_role_to_callers_of_those_domains if {
	roles := [domain_role(fabrikam_helpdesk, ["fabrikam.example.net"])]
	authz.allow with input as view(fabrikam_caller, user, finance) with data.dirgate.roles as roles

	# The same DN (a trustee of another domain's look-alike) with another domain.
	not authz.allow with input as view(object.union(fabrikam_caller, {"domainName": "corp.example.com"}), user, finance)
		with data.dirgate.roles as roles
}

test_subject_domains_ignore_letter_case if {
	authz.allow with input as view(fabrikam_caller, user, finance)
		with data.dirgate.roles as [domain_role(fabrikam_helpdesk, ["FABRIKAM.example.NET"])]
	authz.allow with input as view(object.union(fabrikam_caller, {"domainName": "Fabrikam.Example.Net"}), user, finance)
		with data.dirgate.roles as [domain_role(fabrikam_helpdesk, ["fabrikam.example.net"])]
}

test_subject_domains_any_of_several if {
	authz.allow with input as view(fabrikam_caller, user, finance)
		with data.dirgate.roles as [domain_role(fabrikam_helpdesk, ["corp.example.com", "fabrikam.example.net"])]
}

test_empty_or_absent_subject_domains_apply_to_every_domain if {
	authz.allow with input as view(fabrikam_caller, user, finance)
		with data.dirgate.roles as [domain_role(fabrikam_helpdesk, [])]
	authz.allow with input as view(fabrikam_caller, user, finance)
		with data.dirgate.roles as [role(fabrikam_helpdesk, {"all": true}, [])]
}

test_a_caller_without_a_domain_is_in_no_subject_domain if {
	nodomain := object.union(fabrikam_caller, {"domainName": ""})
	not authz.allow with input as view(nodomain, user, finance)
		with data.dirgate.roles as [domain_role(fabrikam_helpdesk, ["fabrikam.example.net"])]
	not authz.allow with input as view(nodomain, user, finance)
		with data.dirgate.roles as [domain_role(fabrikam_helpdesk, [""])]
	not authz.allow with input as view(object.remove(fabrikam_caller, ["domainName"]), user, finance)
		with data.dirgate.roles as [domain_role(fabrikam_helpdesk, ["fabrikam.example.net"])]

	# Without subjectDomains the role applies to it.
	authz.allow with input as view(nodomain, user, finance)
		with data.dirgate.roles as [role(fabrikam_helpdesk, {"all": true}, [])]
}

test_subject_domains_that_are_not_a_list_apply_to_no_one if {
	not authz.allow with input as view(fabrikam_caller, user, finance)
		with data.dirgate.roles as [domain_role(fabrikam_helpdesk, "fabrikam.example.net")]
	not authz.allow with input as view(fabrikam_caller, user, finance)
		with data.dirgate.roles as [domain_role(fabrikam_helpdesk, null)]
}

test_subject_domains_and_domain_scope_together if {
	# FABRIKAM's help desk views FABRIKAM's objects only, and only as FABRIKAM's callers.
	roles := [object.union(role(fabrikam_helpdesk, {"domain": "fabrikam.example.net"}, []), {"subjectDomains": ["fabrikam.example.net"]})]
	authz.allow with input as view(fabrikam_caller, fabrikam_user, finance) with data.dirgate.roles as roles
	not authz.allow with input as view(fabrikam_caller, user, finance) with data.dirgate.roles as roles
}

test_reasons_name_a_domain_scope if {
	r := authz.reasons with input as view(fabrikam_caller, fabrikam_user, finance)
		with data.dirgate.roles as [role(fabrikam_helpdesk, {"domain": "fabrikam.example.net"}, [])]
	r == {`role r, scope {"domain":"fabrikam.example.net"}`}
}

test_properties_follow_domain_roles if {
	roles := [object.union(role(fabrikam_helpdesk, {"domain": "fabrikam.example.net"}, []), {"subjectDomains": ["fabrikam.example.net"], "properties": ["mail"]})]
	authz.properties == {"mail"} with input as view(fabrikam_caller, fabrikam_user, finance) with data.dirgate.roles as roles
	authz.properties == set() with input as view(object.union(fabrikam_caller, {"domainName": "corp.example.com"}), fabrikam_user, finance)
		with data.dirgate.roles as roles
}

# data_errors: the mistakes in the roles that dirgate refuses to load.

test_the_bundled_roles_have_no_errors if {
	count(authz.data_errors) == 0
}

test_valid_domain_roles_have_no_errors if {
	count(authz.data_errors) == 0 with data.dirgate.roles as [
		object.union(role(fabrikam_helpdesk, {"domain": "fabrikam.example.net"}, []), {"subjectDomains": ["fabrikam.example.net", "CORP.example.com"]}),
		domain_role(fabrikam_helpdesk, []),
	]
}

test_no_roles_no_errors if {
	count(authz.data_errors) == 0 with data.dirgate.roles as []
}

test_an_unknown_role_key_is_an_error if {
	errs := authz.data_errors with data.dirgate.roles as [object.union(role(helpdesk.dn, staff, []), {"subjectDomain": ["corp.example.com"]})]
	errs == {`role "r" (roles[0]): unknown key "subjectDomain" (known: description, name, objectTypes, permissions, properties, scopes, subjectDomains, trustees)`}
}

test_an_unknown_scope_kind_is_an_error if {
	errs := authz.data_errors with data.dirgate.roles as [role(helpdesk.dn, {"domian": "corp.example.com"}, [])]
	errs == {`role "r" (roles[0]): scopes[0] has the unknown kind "domian" (known: all, domain, membersOf, subtree)`}
}

test_bad_domain_names_are_errors if {
	every bad in ["", "DC=corp,DC=example,DC=com", "corp.example.com.", ".corp", "corp..example", "corp example.com", 42, ["corp.example.com"]] {
		errs := authz.data_errors with data.dirgate.roles as [role(helpdesk.dn, {"domain": bad}, [])]
		errs == {sprintf(`role "r" (roles[0]): scopes[0].domain must be a domain's DNS name such as "corp.example.com", not %s`, [json.marshal(bad)])}
		errs2 := authz.data_errors with data.dirgate.roles as [domain_role(helpdesk.dn, ["corp.example.com", bad])]
		errs2 == {sprintf(`role "r" (roles[0]): subjectDomains[1] must be a domain's DNS name such as "corp.example.com", not %s`, [json.marshal(bad)])}
	}
}

test_subject_domains_must_be_an_array if {
	errs := authz.data_errors with data.dirgate.roles as [{"trustees": [], "subjectDomains": "corp.example.com"}]
	errs == {`roles[0]: subjectDomains must be an array of domain names`}
}

test_roles_must_be_objects_in_an_array if {
	authz.data_errors == {`roles[1] must be an object`} with data.dirgate.roles as [role(helpdesk.dn, staff, []), "admins"]
	authz.data_errors == {"data.dirgate.roles must be an array of roles"} with data.dirgate.roles as {"r": role(helpdesk.dn, staff, [])}
}

# A well-known SID is the same in every domain: subjectDomains keeps a role naming
# one to the callers of the domains it lists.
builtin_admins(caller) := object.union(caller, {"groups": [{"dn": "CN=Administrators,CN=Builtin,DC=x", "guid": "", "sid": "S-1-5-32-544"}]})

test_subject_domains_keep_a_well_known_sid_to_one_domain if {
	roles := [object.union(role("S-1-5-32-544", {"all": true}, []), {"subjectDomains": ["corp.example.com"]})]
	authz.allow with input as view(builtin_admins(helpdesk), user, finance) with data.dirgate.roles as roles
	not authz.allow with input as view(builtin_admins(fabrikam_caller), user, finance) with data.dirgate.roles as roles
	authz.allow with input as view(builtin_admins(fabrikam_caller), user, finance)
		with data.dirgate.roles as [role("S-1-5-32-544", {"all": true}, [])]
}

test_domain_scope_leaves_out_a_child_domain if {
	child := object.union(directory_object("CN=Sam,DC=sales,DC=fabrikam,DC=example,DC=net", "user"), {"domainName": "sales.fabrikam.example.net"})
	not authz.allow with input as view(helpdesk, child, finance)
		with data.dirgate.roles as [role(helpdesk.dn, {"domain": "fabrikam.example.net"}, [])]

	# A subtree scope on the domain's DN covers it.
	authz.allow with input as view(helpdesk, child, finance)
		with data.dirgate.roles as [role(helpdesk.dn, {"subtree": "DC=fabrikam,DC=example,DC=net"}, [])]
}

test_an_unknown_scope_kind_covers_nothing if {
	not authz.allow with input as view(helpdesk, fabrikam_user, finance)
		with data.dirgate.roles as [role(helpdesk.dn, {"domian": "fabrikam.example.net"}, [])]
}
