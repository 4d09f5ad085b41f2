"""Generated vaults for the benchmarks: notes in English, Korean and Japanese (2:1:1), with
YAML frontmatter (topic, tags, date), two to four paragraphs each, drawn from small word lists
so that queries find many candidates. Notes share topics, so chains form: with `topics` topics
over n notes, a topic has n / topics versions on average (the newest is current).

    python bench/vaultgen.py DIR --notes 10000 [--topics 3000] [--seed 42]

`make_vault` is what the scripts call; the same seed and counts give the same bytes.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

EN = ("deploy release rollback database migration index cache latency queue worker schedule retry "
      "timeout backup restore kubernetes docker terraform postgres redis kafka nginx grafana alert "
      "incident review decision test coverage refactor module interface config secret token rotate "
      "budget invoice ledger payment customer onboarding search ranking embedding vector memory agent").split()
KO = ("배포 롤백 데이터베이스 마이그레이션 인덱스 캐시 지연 작업자 일정 재시도 백업 복구 장애 검토 결정 "
      "테스트 리팩터링 설정 비밀 토큰 예산 결제 고객 검색 순위 임베딩 벡터 메모리 에이전트 서버").split()
JA = ("デプロイ ロールバック データベース 移行 索引 キャッシュ 遅延 ワーカー 予定 再試行 バックアップ 復旧 "
      "障害 レビュー 決定 テスト 設定 秘密 トークン 予算 支払い 顧客 検索 順位 埋め込み ベクトル 記憶").split()


def make_note(rng: random.Random, i: int, topics: int = 3000) -> str:
    lang = rng.choice(["en", "en", "ko", "ja"])
    words = {"en": EN, "ko": KO, "ja": JA}[lang]
    sep = "" if lang == "ja" else " "
    topic = f"topic-{rng.randrange(topics)}"
    paras = []
    for _ in range(rng.randint(2, 4)):
        sent = [sep.join(rng.choice(words) for _ in range(rng.randint(6, 14))) for _ in range(rng.randint(1, 3))]
        paras.append(("。" if lang == "ja" else ". ").join(sent) + ("。" if lang == "ja" else "."))
    return (f"---\ntopic: {topic}\ntags: [{lang}, {rng.choice(EN)}]\ndate: 2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}\n---\n"
            f"# Note {i}\n\n" + "\n\n".join(paras) + "\n")


def make_vault(root: Path, notes: int, topics: int | None = None, seed: int = 42) -> bool:
    """Write `notes` notes under root/memory (nothing when that many are there already); True
    when it wrote them."""
    memory = root / "memory"
    if memory.is_dir() and sum(1 for _ in memory.iterdir()) == notes:
        return False
    memory.mkdir(parents=True, exist_ok=True)
    for old in memory.iterdir():
        old.unlink()
    rng = random.Random(seed)
    for i in range(notes):
        (memory / f"n{i:05d}.md").write_text(make_note(rng, i, topics or 3000), encoding="utf-8")
    return True


def queries(n: int, seed: int = 7) -> list[str]:
    """One to three words from the three lists: what an agent's short questions look like."""
    rng = random.Random(seed)
    return [" ".join(rng.choice(EN + KO + JA) for _ in range(rng.randint(1, 3))) for _ in range(n)]


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", type=Path)
    ap.add_argument("--notes", type=int, default=10000)
    ap.add_argument("--topics", type=int, default=None, help="default 3000")
    ap.add_argument("--seed", type=int, default=42)
    a = ap.parse_args()
    wrote = make_vault(a.dir, a.notes, a.topics, a.seed)
    print(f"{'wrote' if wrote else 'kept'} {a.notes} notes in {a.dir / 'memory'}")
