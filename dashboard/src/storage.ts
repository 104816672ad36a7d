// Files, through Supabase Storage's API (/storage/v1): buckets, their objects with image
// previews (transformed by the server), uploads and deletions.

import { blob, call, part } from "./api.js";
import { action, h, notice, replace } from "./dom.js";

interface Bucket {
  id: string;
  name: string;
  public: boolean;
  created_at?: string;
}

interface StoredObject {
  name: string;
  id: string | null;
  metadata: { size?: number; mimetype?: string } | null;
}

export async function storagePage(content: HTMLElement, selected?: string): Promise<void> {
  const { body: buckets } = await call<Bucket[]>("GET", "/storage/v1/bucket");
  const main = h("section", { class: "grow" });
  const name = h("input", { name: "bucket", placeholder: "new bucket", required: true });
  const isPublic = h("input", { type: "checkbox", name: "public" });
  const message = h("div");
  const create = h("form", { class: "toolbar" }, name, h("label", { class: "inline" }, isPublic, "public"), h("button", { type: "submit" }, "Create"));
  create.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      await call("POST", "/storage/v1/bucket", { name: name.value.trim(), public: isPublic.checked });
      location.hash = `#/storage/${part(name.value.trim())}`;
    } catch (e) {
      replace(message, notice((e as Error).message));
    }
  });
  replace(
    content,
    h(
      "div",
      { class: "split" },
      h(
        "aside",
        {},
        h("h2", {}, "Buckets"),
        h(
          "ul",
          { class: "list" },
          buckets.map((b) =>
            h("li", {}, h("a", { href: `#/storage/${part(b.id)}`, class: b.id === selected ? "active" : undefined }, b.name, b.public ? h("span", { class: "muted small" }, " public") : null)),
          ),
        ),
        create,
        message,
      ),
      main,
    ),
  );
  const bucket = buckets.find((b) => b.id === selected);
  if (bucket) await objectsView(main, bucket);
  else replace(main, h("p", { class: "muted" }, buckets.length ? "Choose a bucket." : "No buckets yet."));
}

async function objectsView(main: HTMLElement, bucket: Bucket): Promise<void> {
  const message = h("div");
  const grid = h("div", { class: "files" });
  const file = h("input", { type: "file", name: "file", multiple: true });
  const objectPath = (name: string) => `${part(bucket.id)}/${name.split("/").map(part).join("/")}`;
  const load = async (): Promise<void> => {
    const { body } = await call<StoredObject[]>("POST", `/storage/v1/object/list/${part(bucket.id)}`, {
      prefix: "",
      limit: 100,
      offset: 0,
      sortBy: { column: "name", order: "asc" },
    });
    const files = body.filter((o) => o.id !== null);
    replace(
      grid,
      files.length === 0 ? h("p", { class: "muted" }, "No files yet.") : null,
      files.map((o) => {
        const preview = h("div", { class: "preview" });
        const type = o.metadata?.mimetype ?? "";
        if (type.startsWith("image/")) {
          blob(`/storage/v1/render/image/authenticated/${objectPath(o.name)}?width=160&height=160&resize=contain`)
            .then((b) => preview.append(h("img", { src: URL.createObjectURL(b), alt: o.name })))
            .catch(() => preview.append(h("span", { class: "muted small" }, "no preview")));
        } else {
          preview.append(h("span", { class: "muted small" }, type || "file"));
        }
        const remove = action(
          "Delete",
          message,
          async () => {
            await call("DELETE", `/storage/v1/object/${part(bucket.id)}`, { prefixes: [o.name] });
            await load();
          },
          { kind: "small danger", ask: `Delete ${o.name}?` },
        );
        return h(
          "figure",
          {},
          preview,
          h("figcaption", {}, o.name, h("br"), h("span", { class: "muted small" }, `${o.metadata?.size ?? "?"} bytes`), " ", remove),
        );
      }),
    );
  };
  file.addEventListener("change", async () => {
    replace(message);
    try {
      for (const f of Array.from(file.files ?? [])) {
        await call("POST", `/storage/v1/object/${objectPath(f.name)}`, f, {
          "Content-Type": f.type || "application/octet-stream",
          "x-upsert": "true",
        });
      }
      file.value = "";
      await load();
    } catch (e) {
      replace(message, notice((e as Error).message));
    }
  });
  replace(main, h("div", { class: "toolbar" }, h("h2", {}, bucket.name), h("label", { class: "button" }, "Upload", file)), message, grid);
  await load();
}
