//! A read's JSON body as PostgREST's CSV: NULL as nothing, booleans as `t`/`f`, JSON as its
//! text, each field quoted as PostgreSQL quotes a record's (`format::csv`).

use serde_json::{Map, Value};

use crate::format::csv::{document, push_field};

/// The CSV of `body`, a JSON array of objects whose keys are `header`.
pub fn from_json(body: &str, header: &[String]) -> Vec<u8> {
    let rows: Vec<Map<String, Value>> = serde_json::from_str(body).unwrap_or_default();
    document(header, rows.len(), |i, out| {
        for (j, value) in rows[i].values().enumerate() {
            if j > 0 {
                out.push(b',');
            }
            match value {
                Value::Null => {}
                Value::Bool(b) => out.push(if *b { b't' } else { b'f' }),
                Value::String(s) => push_field(out, s),
                other => push_field(out, &other.to_string()),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::from_json;

    #[test]
    fn values_are_written_as_postgresql_writes_record_fields() {
        let body = r#"[{"id":1,"name":"a b","ok":true,"n":null,"q":"say \"hi\"","e":""},{"id":2,"name":"x","ok":false,"n":1.5,"q":"a,b","e":"c"}]"#;
        let header = ["id", "name", "ok", "n", "q", "e"].map(String::from);
        assert_eq!(
            String::from_utf8(from_json(body, &header)).unwrap(),
            "id,name,ok,n,q,e\n1,\"a b\",t,,\"say \"\"hi\"\"\",\"\"\n2,x,f,1.5,\"a,b\",c"
        );
        assert_eq!(from_json("[]", &header), b"\n");
    }
}
