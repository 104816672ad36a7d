//! `Accept: application/geo+json` with PostGIS, which `scripts/prereqs` installs: the rows as a
//! GeoJSON FeatureCollection, as PostgREST answers.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::{harness, request, sql};

fn places() {
    let uri = harness().superuser_uri.clone();
    let created = crate::support::block_on(async move {
        let cfg: tokio_postgres::Config = uri.parse().expect("uri");
        let client = rowgate::backend::postgres::connect_without_tls(&cfg).await.expect("connect");
        client.batch_execute("CREATE EXTENSION IF NOT EXISTS postgis").await
    });
    if let Err(e) = created {
        panic!("PostGIS is needed for the GeoJSON tests (scripts/prereqs installs it): {e:?}");
    }
    sql("DROP TABLE IF EXISTS test.places;
         CREATE TABLE test.places (id int PRIMARY KEY, name text, geom geometry(Point, 4326));
         INSERT INTO test.places VALUES (1, 'a', 'SRID=4326;POINT(1 2)'), (2, 'b', NULL);
         GRANT SELECT ON test.places TO web_anon;
         NOTIFY rowgate, 'reload schema';");
}

#[test]
fn rows_become_a_feature_collection() {
    places();
    let accept = [("accept", "application/geo+json")];
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut r = request("GET", "/places?order=id", &accept);
    while r.status != 200 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        r = request("GET", "/places?order=id", &accept);
    }
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.header("content-type"), Some("application/geo+json; charset=utf-8"));
    assert_eq!(
        r.json(),
        json!({"type": "FeatureCollection", "features": [
            {"type": "Feature", "geometry": {"type": "Point", "coordinates": [1, 2]}, "properties": {"id": 1, "name": "a"}},
            {"type": "Feature", "geometry": {"type": null}, "properties": {"id": 2, "name": "b"}}
        ]})
    );
    let r = request("GET", "/places?select=name&id=eq.1", &accept);
    assert_eq!((r.status, r.json()["code"].as_str()), (400, Some("22023")), "{}", r.body);
    let r = request("GET", "/places?id=eq.9", &accept);
    assert_eq!(r.body, r#"{"type" : "FeatureCollection", "features" : []}"#);
}
