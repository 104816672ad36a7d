// One PocketBase app's requests, through PocketBase's own JS SDK, against the server at
// argv[2]: each step's answer (status and body, or the SDK's error) printed as one JSON
// array. The differential test (tests/it/pocketbase.rs) runs it against rowgate and compares
// with its run against PocketBase itself (tests/pocketbase/capture.py records that).
//
// With `--setup EMAIL PASSWORD` it first makes the app's collections through PocketBase's
// collections API as that superuser, and ends with steps of that API and of rules (rowgate's
// side runs it so too, and also over the same tables made in SQL, passing `--superuser EMAIL
// PASSWORD`: the superuser's own steps come last, the collections' are left out).
import PocketBase from 'pocketbase';
import { EventSource } from 'eventsource';

// PocketBase's SDK subscribes through the browser's EventSource, which Node 20 lacks.
globalThis.EventSource = EventSource;

const [base, flag, email, password] = process.argv.slice(2);
const pb = new PocketBase(base);
pb.autoCancellation(false);

if (flag === '--setup') {
  const admin = new PocketBase(base);
  await admin.collection('_superusers').authWithPassword(email, password);
  const everyone = { listRule: '', viewRule: '', createRule: '', updateRule: '', deleteRule: '' };
  const authors = await admin.collections.create({
    name: 'authors',
    type: 'base',
    ...everyone,
    fields: [{ name: 'name', type: 'text', required: true }],
  });
  const posts = await admin.collections.create({
    name: 'posts',
    type: 'base',
    ...everyone,
    fields: [
      { name: 'title', type: 'text', required: true },
      { name: 'author', type: 'relation', collectionId: authors.id, maxSelect: 1 },
      { name: 'views', type: 'number' },
      { name: 'published', type: 'bool' },
      { name: 'tags', type: 'json' },
      { name: 'meta', type: 'json' },
      { name: 'created', type: 'autodate', onCreate: true, onUpdate: false },
      { name: 'updated', type: 'autodate', onCreate: true, onUpdate: true },
    ],
  });
  await admin.collections.create({
    name: 'comments',
    type: 'base',
    ...everyone,
    fields: [
      { name: 'body', type: 'text', required: true },
      { name: 'post', type: 'relation', collectionId: posts.id, maxSelect: 1 },
    ],
  });
}

const steps = [];
async function step(name, run) {
  try {
    const body = await run();
    steps.push({ name, ok: true, body });
  } catch (e) {
    steps.push({ name, ok: false, status: e.status, body: e.response });
  }
}

const posts = pb.collection('posts');
const made = [];
for (const post of [
  { title: 'Hello', views: 3, tags: ['a', 'b'] },
  { title: 'World', views: 10.5, published: true, meta: { k: 1 } },
  { title: 'T0', views: 0 },
  { title: 'T1', views: 1, meta: { k: 2, nested: { deep: 'x' } } },
  { title: 'T2', views: 2, published: true },
]) {
  await step(`create ${post.title}`, async () => {
    const r = await posts.create(post);
    made.push(r.id);
    return r;
  });
}
await step('create with a given id', () => posts.create({ id: 'given0000000001', title: 'Given', views: 7 }));

await step('list, default page', () => posts.getList());
await step('list, page 1 of 2', () => posts.getList(1, 2));
await step('list, page 3 of 2', () => posts.getList(3, 2));
await step('list, past the end', () => posts.getList(9, 2));
await step('list, skipTotal', () => posts.getList(2, 2, { skipTotal: true }));
await step('list, perPage too big', () => posts.getList(1, 5000, { fields: 'title' }));
await step('full list', () => posts.getFullList({ sort: 'title', batch: 2 }));

for (const sort of ['title', '-views', 'published,-title', '+views']) {
  await step(`sort ${sort}`, () => posts.getList(1, 30, { sort, fields: 'title,views,published' }));
}

for (const filter of [
  "title ~ 'ell'",
  "title ~ 'T%'",
  "title ~ 't'",
  "title !~ 'T'",
  "views >= 1 && views < 10 || title = 'Hello'",
  "title = 'Hello' || views >= 1 && views < 2",
  "(views > 1 && views < 5) || (published = true && views > 10)",
  'meta = null',
  'meta != null',
  'meta.k = 1',
  "meta.nested.deep = 'x'",
  'published = true',
  'published = 1',
  'published != true',
  "title != 'Hello'",
  'title = null',
  'title != null',
  "views > '1'",
  '3 = views',
  '10 < views',
  'views = 3.0',
  "title = \"World\" // a comment",
  'created <= @now',
  'created > @now',
  "created >= @todayStart && updated <= @todayEnd",
  "'a' = 'a'",
  '1 = 2',
  "title = 'He\\'llo'",
  "id = ''",
]) {
  await step(`filter ${filter}`, () => posts.getList(1, 30, { filter, sort: 'title', fields: 'title' }));
}
await step('filter with values bound by the SDK', () =>
  posts.getList(1, 30, { filter: pb.filter('title = {:t} || views > {:v}', { t: "it's", v: 5 }), sort: 'title', fields: 'title' }),
);

for (const fields of ['id,title', 'title:excerpt(3,true),views', 'title:excerpt(2)', '*', 'nope']) {
  await step(`fields ${fields}`, () => posts.getList(1, 2, { fields, sort: 'title' }));
}

await step('view', () => posts.getOne(made[0]));
await step('view, fields', () => posts.getOne(made[1], { fields: 'title,meta' }));
await step('view, missing', () => posts.getOne('nope00000000000'));
await step('first list item', () => posts.getFirstListItem('title="World"'));
await step('first list item, none', () => posts.getFirstListItem('title="Nobody"'));

await step('update', () => posts.update(made[0], { title: 'Hi', views: 42, published: 'true' }));
await step('update, fields', () => posts.update(made[1], { views: '7' }, { fields: 'views' }));
await step('update, blank required field', () => posts.update(made[2], { title: '' }));
await step('update, missing', () => posts.update('nope00000000000', { title: 'x' }));
await step('list after updates', () => posts.getList(1, 30, { sort: 'title', fields: 'title,views,published' }));

await step('create, missing required field', () => posts.create({ views: 1 }));
await step('create, wrong types converted', () => posts.create({ title: 12, views: 'x', published: 0 }));

await step('delete', () => posts.delete(made[4]));
await step('delete again', () => posts.delete(made[4]));
await step('view deleted', () => posts.getOne(made[4]));

for (const filter of ["(title ~", 'nosuch = 1', "title 'x'", '()', 'created > @never']) {
  await step(`bad filter ${filter}`, () => posts.getList(1, 30, { filter }));
}
await step('bad sort', () => posts.getList(1, 30, { sort: 'nosuch' }));
await step('bad page', () => pb.send('/api/collections/posts/records', { query: { page: 'abc' } }));
await step('guest filtering by @request', () => posts.getList(1, 30, { filter: "@request.auth.id = ''" }));
await step('unknown collection', () => pb.collection('nope').getList());
await step('unknown route', () => pb.send('/api/nothing/here', {}));
await step('health', () => pb.health.check());

// Relations: a post's author, and the comments that point at a post.
const authors = pb.collection('authors');
const comments = pb.collection('comments');
const people = [];
for (const name of ['ann', 'bob']) {
  await step(`create author ${name}`, async () => {
    const r = await authors.create({ name });
    people.push(r.id);
    return r;
  });
}
await step('relate a post', () => posts.update(made[0], { author: people[0] }));
await step('relate another', () => posts.update(made[1], { author: people[1] }));
await step('relate a third, expanded', () => posts.update(made[3], { author: people[0] }, { expand: 'author' }));
for (const [body, post] of [['first', made[0]], ['second', made[0]], ['third', made[1]]]) {
  await step(`comment ${body}`, () => comments.create({ body, post }, { expand: 'post' }));
}
await step('list, expand author', () => posts.getList(1, 30, { sort: 'title', expand: 'author' }));
await step('view, expand both ways', () => posts.getOne(made[0], { expand: 'author,comments_via_post' }));
await step('list, nested expand', () => comments.getList(1, 30, { sort: 'body', expand: 'post.author' }));
await step('list, back-relation nested', () =>
  authors.getList(1, 30, { sort: 'name', expand: 'posts_via_author.comments_via_post' }),
);
await step('expand, unknown', () => posts.getList(1, 30, { sort: 'title', fields: 'title', expand: 'nope,author.nope' }));
await step('expand with fields', () => posts.getList(1, 30, { sort: 'title', fields: 'title,expand', expand: 'author' }));
await step('filter by a relation id', () =>
  posts.getList(1, 30, { filter: `author = '${people[0]}'`, sort: 'title', fields: 'title' }),
);
await step('first item, expanded', () => comments.getFirstListItem(`body = 'third'`, { expand: 'post' }));
for (const filter of [
  "author.name = 'ann'",
  "author.name != 'ann'",
  "author.name ~ 'B'",
  "author.name !~ 'b'",
  'author.name = null',
  'author.name != null',
  "'bob' = author.name",
  "author.name = 'ann' || title = 'T0'",
  "author.name = 'ann' && author.name != 'bob' && views > 1",
  "author.id = ''",
]) {
  await step(`filter through a relation: ${filter}`, () => posts.getList(1, 30, { filter, sort: 'title', fields: 'title' }));
}
await step('filter two relations deep', () =>
  comments.getList(1, 30, { filter: "post.author.name = 'bob' || post.title = 'Hi'", sort: 'body', fields: 'body' }),
);
await step('filter through a relation, unknown field', () => posts.getList(1, 30, { filter: 'author.nosuch = 1' }));
await step('sort through a relation', () => posts.getList(1, 30, { sort: 'author.name,title', fields: 'title' }));
await step('sort through a relation, descending', () =>
  posts.getList(1, 30, { sort: '-author.name,-title', fields: 'title,author', expand: 'author', filter: "author.name ~ 'n'" }),
);

// Accounts: PocketBase's `users` auth collection.
const users = pb.collection('users');
const pat = { email: 'pat@example.com', password: 'secret-pass-1', passwordConfirm: 'secret-pass-1' };
await step('auth methods', () => users.listAuthMethods());
await step('sign up', () => users.create({ ...pat, name: 'Pat' }));
await step('sign up, taken', () => users.create(pat));
await step('sign up, short password', () => users.create({ email: 'sam@example.com', password: 'short', passwordConfirm: 'short' }));
await step('sign up, mismatch', () => users.create({ ...pat, email: 'sam@example.com', passwordConfirm: 'other-pass-1' }));
await step('sign up, no address', () => users.create({ password: pat.password, passwordConfirm: pat.password }));
await step('sign in, wrong password', () => users.authWithPassword(pat.email, 'wrong-password'));
await step('sign in, unknown address', () => users.authWithPassword('nobody@example.com', pat.password));
await step('sign in, blank', () => users.authWithPassword('', ''));
await step('sign in', () => users.authWithPassword(pat.email, pat.password));
await step('the SDK holds the token', async () => ({
  valid: pb.authStore.isValid,
  superuser: pb.authStore.isSuperuser,
  name: pb.authStore.record?.name,
}));
await step('own record', () => users.getOne(pb.authStore.record.id));
await step('another record', () => users.getOne('nope00000000000'));
await step('users listed', () => users.getList());
await step('refresh', () => users.authRefresh());
await step('posts, signed in', () => posts.getList(1, 2, { sort: 'title', fields: 'title' }));
const token = pb.authStore.token;
pb.authStore.clear();
await step('refresh, signed out', () => users.authRefresh());
await step('users listed, signed out', () => users.getList());
await step('a token that does not verify', () =>
  pb.send('/api/collections/posts/records', { query: { perPage: 1, fields: 'title', sort: 'title' }, headers: { Authorization: token.slice(0, -3) + 'abc' } }),
);

// Superusers (on rowgate, the dashboard's administrators).
const root = new PocketBase(base);
root.autoCancellation(false);
const supers = root.collection('_superusers');
await step('superuser auth methods', () => supers.listAuthMethods());
await step('superuser sign in, wrong password', () => supers.authWithPassword(email, 'wrong-password'));
await step('superuser sign in, blank', () => supers.authWithPassword(email, ''));
await step('superuser sign in, not JSON', () =>
  root.send('/api/collections/_superusers/auth-with-password', { method: 'POST', body: '{"identity":', headers: { 'content-type': 'application/json' } }),
);
await step('superuser sign in', () => supers.authWithPassword(email, password));
await step('the SDK knows a superuser', async () => ({
  valid: root.authStore.isValid,
  superuser: root.authStore.isSuperuser,
  email: root.authStore.record?.email,
}));
await step('superuser refresh', () => supers.authRefresh());
await step('superuser lists posts', () => root.collection('posts').getList(1, 2, { sort: 'title', fields: 'title' }));
await step('a user token refreshed as a superuser', () =>
  root.send('/api/collections/_superusers/auth-refresh', { method: 'POST', headers: { Authorization: token } }),
);
await step('superuser refresh, signed out', () =>
  root.send('/api/collections/_superusers/auth-refresh', { method: 'POST', headers: { Authorization: '' } }),
);

// Realtime: server-sent events, each subscription's events in the order they came.
const live = new PocketBase(base);
live.autoCancellation(false);
const seen = { all: [], titles: [], one: [], filtered: [] };
const until = async (done) => {
  for (let i = 0; i < 100 && !done(); i++) await new Promise((r) => setTimeout(r, 50));
};
await step('subscribe to a collection', async () => {
  await live.collection('posts').subscribe('*', (e) => seen.all.push(e));
  await live.collection('posts').subscribe('*', (e) => seen.titles.push(e), { fields: 'title,views' });
  await live.collection('posts').subscribe('*', (e) => seen.filtered.push(e), {
    filter: "views >= 2 && title != 'nope' && published = true",
    fields: 'title',
  });
  return live.realtime.isConnected;
});
// A record subscribed to before it is made (a change committed before a subscription may
// reach it: rowgate's change feed on PostgreSQL is read after the commit).
const lively = { id: 'live00000000001' };
await step('subscribe to a record', async () => {
  await live.collection('posts').subscribe(lively.id, (e) => seen.one.push(e));
  return live.realtime.isConnected;
});
await posts.create({ id: lively.id, title: 'Live', views: 1 });
await posts.update(lively.id, { views: 2, published: true });
await posts.create({ title: 'Live too' });
await posts.delete(lively.id);
await until(() => seen.all.length >= 4 && seen.titles.length >= 4 && seen.one.length >= 3 && seen.filtered.length >= 2);
await step('events of the collection', async () => seen.all);
await step('events of the collection, fields', async () => seen.titles);
await step('events of the record', async () => seen.one);
await step('events of the collection, filtered', async () => seen.filtered);
await step('unsubscribe', async () => {
  await live.collection('posts').unsubscribe();
  return live.realtime.isConnected;
});
await step('set subscriptions of an unknown client', () =>
  pb.send('/api/realtime', { method: 'POST', body: { clientId: 'nope', subscriptions: ['posts/*'] } }),
);
await step('set subscriptions without a client', () =>
  pb.send('/api/realtime', { method: 'POST', body: { subscriptions: ['posts/*'] } }),
);

// The collections API, rules with expressions and fields' options, where the program made its
// collections itself (`--setup`): steps named `collections: …`, `rules: …` and `values: …`.
if (flag === '--setup') {
  const mine = new PocketBase(base);
  mine.autoCancellation(false);
  await mine.collection('users').authWithPassword(pat.email, pat.password);
  const patId = mine.authStore.record.id;
  // A refusal's status and its fields' codes (the words of a rule's parse error are each
  // server's own).
  const codes = async (run) => {
    try {
      return await run();
    } catch (e) {
      const of = (v) => (v && typeof v === 'object' ? (v.code ? v.code : Object.fromEntries(Object.entries(v).map(([k, x]) => [k, of(x)]))) : v);
      return { status: e.status, message: e.response?.message, codes: of(e.response?.data) };
    }
  };
  await step('collections: listed', () =>
    root.collections.getList(1, 30, { filter: "type = 'base' && system = false", sort: 'name', fields: 'id,name,type,listRule' }),
  );
  await step('collections: one', () => root.collections.getOne('posts'));
  await step('collections: listed by a user', () => mine.collections.getList());
  await step('collections: listed by a visitor', () => pb.collections.getList());
  await step('collections: a name taken', () => root.collections.create({ name: 'Posts', type: 'base' }));
  await step('collections: bad fields', () =>
    root.collections.create({
      name: 'bad',
      type: 'base',
      fields: [{ name: 'a', type: 'text' }, { name: 'A', type: 'bool' }, { name: 'expand', type: 'text' }],
    }),
  );
  await step('collections: a rule of no field', () => codes(() => root.collections.create({ name: 'bad', type: 'base', listRule: 'nope = 1' })));
  await step('collections: a rule that does not parse', () =>
    codes(() => root.collections.create({ name: 'bad', type: 'base', listRule: "(owner = 'x'" })),
  );
  const ownRule = 'public = true || owner = @request.auth.id';
  await step('collections: made with rules', () =>
    root.collections.create({
      name: 'notes',
      type: 'base',
      listRule: ownRule,
      viewRule: ownRule,
      createRule: "@request.auth.id != '' && owner = @request.auth.id",
      updateRule: 'owner = @request.auth.id',
      deleteRule: 'owner = @request.auth.id',
      fields: [
        { name: 'owner', type: 'text' },
        { name: 'body', type: 'text' },
        { name: 'public', type: 'bool' },
      ],
    }),
  );
  const notes = pb.collection('notes');
  const patNotes = mine.collection('notes');
  await step('rules: a visitor creates', () => notes.create({ owner: '', body: 'anon', public: true }));
  await step('rules: a user creates as another', () => patNotes.create({ owner: 'someone', body: 'forged' }));
  const secret = await patNotes.create({ owner: patId, body: 'secret', public: false });
  const news = await patNotes.create({ owner: patId, body: 'news', public: true });
  await step('rules: made', async () => [secret, news]);
  await step('rules: a visitor lists', () => notes.getList(1, 30, { sort: 'body', fields: 'body' }));
  await step('rules: the owner lists', () => patNotes.getList(1, 30, { sort: 'body', fields: 'body' }));
  await step('rules: a visitor views a secret', () => notes.getOne(secret.id));
  await step('rules: a visitor updates', () => notes.update(news.id, { body: 'taken' }));
  await step('rules: the owner updates', () => patNotes.update(news.id, { body: 'news!' }, { fields: 'body' }));
  await step('rules: a visitor deletes', () => notes.delete(news.id));
  await step('collections: rules changed', () =>
    root.collections.update('notes', { listRule: 'owner = @request.auth.id', viewRule: 'public = true' }),
  );
  await step('rules: a visitor lists, by the list rule', () => notes.getList(1, 30, { sort: 'body', fields: 'body' }));
  await step('rules: a visitor views, by the view rule', () => notes.getOne(news.id, { fields: 'body' }));
  await step('rules: the owner lists, by the list rule', () => patNotes.getList(1, 30, { sort: 'body', fields: 'body' }));
  const defined = await root.collections.getOne('notes');
  await step('collections: a field renamed and one added', () =>
    root.collections.update('notes', {
      fields: [...defined.fields.map((f) => (f.name === 'body' ? { ...f, name: 'text' } : f)), { name: 'rank', type: 'number' }],
    }),
  );
  await step('collections: records after', () => root.collection('notes').getList(1, 30, { sort: 'text', fields: 'text,rank' }));
  await step('collections: a field type changed', () =>
    root.collections.update('notes', { fields: defined.fields.map((f) => (f.name === 'public' ? { ...f, type: 'text' } : f)) }),
  );
  await step('collections: truncated', () => root.collections.truncate('notes'));
  await step('collections: records truncated', () => root.collection('notes').getList(1, 30, { fields: 'text' }));
  await step('collections: made with options', () =>
    root.collections.create({
      name: 'checked',
      type: 'base',
      createRule: '',
      fields: [
        { name: 't', type: 'text', min: 2, max: 4, pattern: '^[a-z]+$' },
        { name: 'n', type: 'number', min: 1, max: 5, onlyInt: true },
        { name: 'e', type: 'email', onlyDomains: ['a.com'] },
        { name: 'u', type: 'url', exceptDomains: ['bad.com'] },
        { name: 's', type: 'select', values: ['x', 'y'] },
        { name: 'm', type: 'select', values: ['x', 'y', 'z'], maxSelect: 2 },
        { name: 'b', type: 'bool', required: true },
        { name: 'j', type: 'json', maxSize: 10 },
      ],
    }),
  );
  const checked = pb.collection('checked');
  await step('values: each refused', () =>
    checked.create({ t: 'A', n: 7.5, e: 'bad', u: 'nope', s: 'q', m: ['x', 'y', 'z'], b: false, j: { aaaaaaaaaaaa: 1 } }),
  );
  await step('values: refused otherwise', () =>
    checked.create({ t: 'AB', n: 9, e: 'x@b.com', u: 'https://bad.com/x', s: 'x', m: ['q'], b: true }),
  );
  await step('values: taken', () =>
    checked.create(
      { t: 'ab', n: 3, e: 'me@a.com', u: 'https://a.com/x', s: 'y', m: ['x', 'z'], b: true, j: [1] },
      { fields: 't,n,e,u,s,m,b,j' },
    ),
  );
  await step('collections: deleted with options', () => root.collections.delete('checked'));
  await step('collections: one still related to', () => root.collections.delete('authors'));
  await step('collections: deleted', () => root.collections.delete('notes'));
  await step('collections: a deleted one', () => root.collections.getOne('notes'));
}

console.log(JSON.stringify(steps, null, 1));
