//! Resource embedding ("Resource Embedding" in the PostgREST docs), the part built so far:
//! many-to-one and one-to-many through foreign keys, aliases, hints, nesting.

use serde_json::json;

use crate::support::{check, get};

fn many_to_one_is_an_object() {
    check(
        "/items?select=id,categories(name)&id=in.(1,3)&order=id",
        200,
        json!([{"id": 1, "categories": {"name": "tools"}}, {"id": 3, "categories": {"name": "food"}}]),
    );
}

fn a_missing_parent_is_null() {
    let r = get("/items?select=id,category:categories(name)&category_id=is.null&limit=1");
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()[0]["category"], serde_json::Value::Null);
}

fn one_to_many_is_an_array() {
    let r = get("/categories?select=name,items(id)&id=in.(3,4)&order=id");
    let body = r.json();
    let mut toys: Vec<i64> =
        body[0]["items"].as_array().unwrap().iter().map(|i| i["id"].as_i64().unwrap()).collect();
    toys.sort();
    assert_eq!(body[0]["name"], "toys");
    assert_eq!(toys, vec![5, 6, 10]);
    assert_eq!(body[1], json!({"name": "empty", "items": []}));
}

fn embeds_nest() {
    let r = get("/categories?select=name,items(id,categories(name))&id=eq.2");
    let items = r.json()[0]["items"].as_array().unwrap().clone();
    assert!(!items.is_empty());
    assert!(items.iter().all(|i| i["categories"] == json!({"name": "food"})), "{}", r.body);
}

fn embedded_filters_order_and_limit() {
    check(
        "/categories?select=name,items(id)&id=eq.3&items.order=id.desc&items.limit=2",
        200,
        json!([{"name": "toys", "items": [{"id": 10}, {"id": 6}]}]),
    );
    check(
        "/categories?select=name,things:items(id)&id=eq.3&things.id=gt.5&things.order=id",
        200,
        json!([{"name": "toys", "things": [{"id": 6}, {"id": 10}]}]),
    );
    check(
        "/categories?select=name,items(id)&id=eq.3&items.or=(id.eq.5,id.eq.10)&items.order=id",
        200,
        json!([{"name": "toys", "items": [{"id": 5}, {"id": 10}]}]),
    );
    // A filter on a to-one embed leaves the parent row and makes the embed null.
    check(
        "/items?select=id,categories(name)&id=eq.1&categories.name=eq.food",
        200,
        json!([{"id": 1, "categories": null}]),
    );
}

fn filters_on_unselected_embeds_are_pgrst108() {
    let r = get("/categories?select=name&items.id=eq.1");
    assert_eq!((r.status, r.json()["code"].clone()), (400, json!("PGRST108")));
}

fn unknown_relationships_are_pgrst200() {
    let r = get("/items?select=id,documents(id)");
    assert_eq!((r.status, r.json()["code"].clone()), (400, json!("PGRST200")));
}

fn inner_embeds_filter_the_parents() {
    check(
        "/categories?select=name,items!inner(id)&items.id=eq.5",
        200,
        json!([{"name": "toys", "items": [{"id": 5}]}]),
    );
    // Without !inner the parents stay, with empty embeds.
    let r = get("/categories?select=name,items(id)&items.id=eq.5&order=id");
    assert_eq!(r.json().as_array().unwrap().len(), 4);
}

fn null_filters_on_embeds() {
    check("/categories?select=name,items()&items=is.null", 200, json!([{"name": "empty"}]));
    let r = get("/categories?select=id,items(id)&items=not.is.null&order=id");
    let ids: Vec<i64> = r.json().as_array().unwrap().iter().map(|c| c["id"].as_i64().unwrap()).collect();
    assert_eq!(ids, vec![1, 2, 3], "{}", r.body);
    // Across embeds inside or=(...).
    let r = get("/categories?select=id,items(id)&items.id=eq.1&or=(items.not.is.null,id.eq.4)&order=id");
    let ids: Vec<i64> = r.json().as_array().unwrap().iter().map(|c| c["id"].as_i64().unwrap()).collect();
    assert_eq!(ids, vec![1, 4], "{}", r.body);
}

fn many_to_many_through_a_join_table() {
    check(
        "/films?select=title,actors(name)&id=eq.1&actors.order=id",
        200,
        json!([{"title": "Duck Soup", "actors": [{"name": "Groucho"}, {"name": "Harpo"}, {"name": "Chico"}]}]),
    );
    check(
        "/actors?select=name,films(title)&id=in.(1,4)&order=id&films.order=id",
        200,
        json!([
            {"name": "Groucho", "films": [{"title": "Duck Soup"}, {"title": "A Night at the Opera"}]},
            {"name": "Nobody", "films": []}
        ]),
    );
    // The join table itself embeds both ways as one-to-many / many-to-one.
    check(
        "/films?select=title,roles(character,actors(name))&id=eq.2",
        200,
        json!([{"title": "A Night at the Opera", "roles": [{"character": "Driftwood", "actors": {"name": "Groucho"}}]}]),
    );
    check("/actors?select=id,films!inner(id)&films.id=eq.2", 200, json!([{"id": 1, "films": [{"id": 2}]}]));
}

fn one_to_one_is_an_object_both_ways() {
    check(
        "/tasks?select=id,task_details(notes)&id=in.(1,2)&order=id",
        200,
        json!([{"id": 1, "task_details": {"notes": "first notes"}}, {"id": 2, "task_details": null}]),
    );
}

fn to_many_spread_is_an_array_per_column() {
    // PostgREST 13's to-many spread: each column becomes the array of its values.
    check(
        "/projects?select=name,...tasks(titles:title,ids:id)&id=in.(1,3)&order=id&tasks.order=id.desc",
        200,
        json!([
            {"name": "alpha", "titles": ["build", "design"], "ids": [2, 1]},
            {"name": "gamma", "titles": [], "ids": []}
        ]),
    );
}

fn to_one_spread_lifts_columns_into_the_parent() {
    check(
        "/tasks?select=title,...projects(project:name)&id=in.(1,4)&order=id",
        200,
        json!([{"title": "design", "project": "alpha"}, {"title": "ship", "project": null}]),
    );
}

fn ordering_by_a_to_one_embedded_column() {
    check(
        "/tasks?select=id,projects(name)&project_id=not.is.null&order=projects(name).desc,id",
        200,
        json!([
            {"id": 3, "projects": {"name": "beta"}},
            {"id": 1, "projects": {"name": "alpha"}},
            {"id": 2, "projects": {"name": "alpha"}}
        ]),
    );
}

fn embeds_named_by_foreign_key_constraint() {
    check(
        "/friendships?select=id,first:friendships_first_id_fkey(name),second:friendships_second_id_fkey(name)&order=id",
        200,
        json!([
            {"id": 1, "first": {"name": "ada"}, "second": {"name": "bob"}},
            {"id": 2, "first": {"name": "cy"}, "second": {"name": "di"}}
        ]),
    );
    check(
        "/friendships?select=id,people!friendships_second_id_fkey(name)&id=eq.2",
        200,
        json!([{"id": 2, "people": {"name": "di"}}]),
    );
}

fn embeds_named_by_foreign_key_column() {
    check(
        "/friendships?select=id,first_id(name),second_id(name)&id=eq.1",
        200,
        json!([{"id": 1, "first_id": {"name": "ada"}, "second_id": {"name": "bob"}}]),
    );
    check(
        "/friendships?select=id,people!second_id(name)&id=eq.1",
        200,
        json!([{"id": 1, "people": {"name": "bob"}}]),
    );
}

fn self_referencing_embeds() {
    // The column's name is the parent (to-one), the table's name the children (to-many).
    check(
        "/people?select=name,mentor_id(name),people(name)&order=id&people.order=id",
        200,
        json!([
            {"name": "ada", "mentor_id": null, "people": [{"name": "bob"}, {"name": "cy"}]},
            {"name": "bob", "mentor_id": {"name": "ada"}, "people": [{"name": "di"}]},
            {"name": "cy", "mentor_id": {"name": "ada"}, "people": []},
            {"name": "di", "mentor_id": {"name": "bob"}, "people": []}
        ]),
    );
    check(
        "/people?select=name,mentees:people!mentor_id(name)&id=eq.2",
        200,
        json!([{"name": "bob", "mentees": [{"name": "di"}]}]),
    );
}

fn count_in_an_embed_counts_its_rows() {
    check(
        "/people?select=name,people(count)&order=id",
        200,
        json!([
            {"name": "ada", "people": [{"count": 2}]},
            {"name": "bob", "people": [{"count": 1}]},
            {"name": "cy", "people": [{"count": 0}]},
            {"name": "di", "people": [{"count": 0}]}
        ]),
    );
}

fn aggregates_group_by_the_other_selected_columns() {
    check(
        "/items?select=category_id,n:count(),last:id.max()&category_id=not.is.null&order=category_id",
        200,
        json!([
            {"category_id": 1, "n": 4, "last": 11},
            {"category_id": 2, "n": 5, "last": 16},
            {"category_id": 3, "n": 3, "last": 10}
        ]),
    );
    check(
        "/categories?select=name,items(n:count())&order=id",
        200,
        json!([
            {"name": "tools", "items": [{"n": 4}]},
            {"name": "food", "items": [{"n": 5}]},
            {"name": "toys", "items": [{"n": 3}]},
            {"name": "empty", "items": [{"n": 0}]}
        ]),
    );
}

fn one_name_for_two_embeds_is_refused() {
    check(
        "/friendships?select=people!first_id(name),people!second_id(name)",
        400,
        json!({
            "code": "42712",
            "details": null,
            "hint": "Give each embedding of 'people' an alias of its own",
            "message": "table name \"people\" specified more than once"
        }),
    );
}

fn aggregates_in_a_to_many_spread_are_pgrst127() {
    check(
        "/categories?select=name,...items(n:count())",
        400,
        json!({
            "code": "PGRST127",
            "details": "Aggregates are not implemented for one-to-many or many-to-many spreads.",
            "hint": null,
            "message": "Feature not implemented"
        }),
    );
}

fn several_relationships_are_pgrst201_with_each_described() {
    check(
        "/friendships?select=people(name)",
        300,
        json!({
            "code": "PGRST201",
            "details": [
                {
                    "cardinality": "many-to-one",
                    "embedding": "friendships with people",
                    "relationship": "friendships_first_id_fkey using friendships(first_id) and people(id)"
                },
                {
                    "cardinality": "many-to-one",
                    "embedding": "friendships with people",
                    "relationship": "friendships_second_id_fkey using friendships(second_id) and people(id)"
                }
            ],
            "hint": "Try changing 'people' to one of the following: 'people!friendships_first_id_fkey', 'people!friendships_second_id_fkey'. Find the desired relationship in the 'details' key.",
            "message": "Could not embed because more than one relationship was found for 'friendships' and 'people'"
        }),
    );
}

#[test]
fn aggregates_group_by_the_other_columns_even_json_paths() {
    // PostgREST 12.0.2 fails this one (42803): it groups by an expression with a bound key.
    check(
        "/items?select=color:data->>color,n:count()&data->>color=in.(red,brown)&order=data->>color",
        200,
        json!([{"color": "brown", "n": 2}, {"color": "red", "n": 2}]),
    );
}

crate::on_both!(
    many_to_one_is_an_object,
    a_missing_parent_is_null,
    one_to_many_is_an_array,
    embeds_nest,
    embedded_filters_order_and_limit,
    filters_on_unselected_embeds_are_pgrst108,
    unknown_relationships_are_pgrst200,
    inner_embeds_filter_the_parents,
    null_filters_on_embeds,
    many_to_many_through_a_join_table,
    one_to_one_is_an_object_both_ways,
    to_many_spread_is_an_array_per_column,
    to_one_spread_lifts_columns_into_the_parent,
    ordering_by_a_to_one_embedded_column,
    embeds_named_by_foreign_key_constraint,
    embeds_named_by_foreign_key_column,
    self_referencing_embeds,
    count_in_an_embed_counts_its_rows,
    several_relationships_are_pgrst201_with_each_described,
    aggregates_group_by_the_other_selected_columns,
    aggregates_in_a_to_many_spread_are_pgrst127,
    one_name_for_two_embeds_is_refused,
);

#[test]
fn an_aliased_embed_named_by_its_relation_is_deprecated() {
    // PostgREST 16: allowed by default, with a Warning ...
    let r = get("/categories?select=name,things:items(id)&id=eq.3&items.order=id.desc&items.limit=1");
    assert_eq!(r.json(), json!([{"name": "toys", "things": [{"id": 10}]}]));
    assert_eq!(
        r.header("warning"),
        Some(
            "299 rowgate \"Embedded resource was referenced by relation name even though it has an alias. \
             This is deprecated and will stop working in a future release. Update `items` to `things` in query \
             string filters, orders or limits.\""
        )
    );
    assert_eq!(
        get("/categories?select=name,things:items(id)&id=eq.3&things.limit=1").header("warning"),
        None
    );
    // ... and PGRST108 under url-use-legacy-target-names = false.
    let mut args = crate::support::default_args(&crate::support::harness().superuser_uri);
    args.url_use_legacy_target_names = Some(false);
    let base = crate::support::start_server(args);
    let r = crate::support::request_to(
        &base,
        "GET",
        "/categories?select=name,things:items(id)&items.limit=1",
        &[],
    );
    assert_eq!(
        (r.status, r.json()),
        (
            400,
            json!({
                "code": "PGRST108",
                "details": "Target names are not allowed in filters if they have an alias",
                "hint": "Change 'items' to 'things' in filters, orders or limits.",
                "message": "'items' is not an embedded resource in this request"
            })
        )
    );
}
