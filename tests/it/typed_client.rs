//! `rowgate gen types typescript`: the `Database` type it prints makes a postgrest-js program
//! type-check — rows, inserts, filters, function calls and enums by their types — and a wrong
//! column fail to compile (`tsc`, from npm, on the real @supabase/postgrest-js).

use std::path::Path;
use std::process::Command;

use crate::support::{authenticator_uri, harness};

/// A program using the `shop` schema as its types say it may.
const TYPED: &str = r#"
import { PostgrestClient } from '@supabase/postgrest-js'
import type { Database, Tables, TablesInsert, Enums } from './db'

const db = new PostgrestClient<Database, { PostgrestVersion: '14' }, 'shop'>('http://localhost:3000', { schema: 'shop' })

export async function use() {
  const { data } = await db.from('products').select('id, name, mood, tags').eq('id', 1)
  if (data) {
    const name: string = data[0].name
    const mood: 'happy' | 'sad' | null = data[0].mood
    const tags: string[] | null = data[0].tags
    console.log(name, mood, tags)
  }
  const row: Tables<'products'> | undefined = undefined
  const entry: TablesInsert<'ledger'> = { id: 1, amount: 2.5 }
  await db.from('ledger').insert(entry)
  await db.from('reviews').insert({ id: 1, product_id: 1 })
  const sum = await db.rpc('add', { a: 1 })
  const n: number | null = sum.data
  const happy: Enums<'mood'> = 'happy'
  const cheap = await db.from('cheap').select('name')
  console.log(row, n, happy, cheap.data?.[0].name)
}
"#;

fn tsc(dir: &Path, file: &str) -> (bool, String) {
    let out = Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/js/node_modules/.bin/tsc"))
        .args(["--noEmit", "--strict", "--skipLibCheck", "--target", "es2022", "--module", "esnext"])
        .args(["--moduleResolution", "bundler", file])
        .current_dir(dir)
        .output()
        .expect("node is needed for tsc");
    (
        out.status.success(),
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)),
    )
}

#[test]
fn generated_types_make_a_postgrest_js_program_type_check() {
    crate::openapi::schema();
    let js = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/js");
    assert!(
        js.join("node_modules/typescript").is_dir(),
        "typescript is not installed: run `npm ci` in tests/js"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_rowgate"))
        .args(["gen", "types", "typescript", "--db-uri", &authenticator_uri(&harness().superuser_uri)])
        .args(["--db-schemas", "shop"])
        .output()
        .expect("rowgate");
    let types = String::from_utf8(out.stdout).expect("utf-8");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(types.contains("      mood: \"happy\" | \"sad\"\n"), "{types}");
    assert!(
        types.contains("          address: Database[\"shop\"][\"CompositeTypes\"][\"address\"] | null\n"),
        "{types}"
    );
    // Under tests/js, where the client's node_modules are found.
    let dir = js.join(".typed").join(std::process::id().to_string());
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("db.ts"), &types).unwrap();
    std::fs::write(dir.join("typed.ts"), TYPED).unwrap();
    let (ok, report) = tsc(&dir, "typed.ts");
    assert!(ok, "the typed program does not compile:\n{report}\n{types}");
    // A column the table does not have, in a filter and in an insert.
    let wrong = TYPED
        .replace(".eq('id', 1)", ".eq('nope', 1)")
        .replace("{ id: 1, product_id: 1 }", "{ id: 1, nope: 1 }");
    std::fs::write(dir.join("wrong.ts"), wrong).unwrap();
    let (ok, report) = tsc(&dir, "wrong.ts");
    assert!(!ok, "a wrong column compiled");
    assert!(report.contains("\"nope\"") || report.contains("'nope'"), "{report}");
    assert_eq!(report.matches("error TS").count(), 2, "{report}");
    // The test fixture's schemas, with every type, unicode and reserved names, views and
    // functions of every result shape: the types compile.
    let out = Command::new(env!("CARGO_BIN_EXE_rowgate"))
        .args(["gen", "types", "typescript", "--db-uri", &authenticator_uri(&harness().superuser_uri)])
        .args(["--db-schemas", "test, v2"])
        .output()
        .expect("rowgate");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::write(dir.join("fixture.ts"), &out.stdout).unwrap();
    let (ok, report) = tsc(&dir, "fixture.ts");
    assert!(ok, "the fixture's types do not compile:\n{report}");
    let _ = std::fs::remove_dir_all(&dir);
}
