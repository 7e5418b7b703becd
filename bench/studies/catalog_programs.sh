#!/usr/bin/env bash
# The real programs under their machine-translated catalogs (issue #48): the German and Russian catalogs
# of util-linux and findutils that `python bench/studies/catalogs.py check` wrote (bench/work/catalogs/out/KIND),
# compiled with msgfmt and put where the programs look for them (/usr/share/locale/LANG/LC_MESSAGES,
# bind-mounted over in a private mount namespace: the system's files are never touched), and every
# installed binary of util-linux, bsdutils, bsdextrautils, util-linux-extra, mount and findutils run in
# harmless forms: --help, --version, a bad option, and (an allowlist) a missing file or a read-only
# listing. A crash is an exit status of 128 or more (a signal); a hang (timeout) is counted apart.
#
#   bash bench/studies/catalog_programs.sh [fake|hostile] [LANG...]     # default: fake de ru; needs root (unshare -m)
#
# The locales (de_DE.UTF-8, ru_RU.UTF-8) are compiled with localedef into a temporary LOCPATH.
# Results: bench/results/catalog_programs.KIND.tsv (program, form, lang, status, translated?), summary on stdout.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
KIND=${1:-fake}; shift || true
LANGS=${*:-de ru}
OUT=$ROOT/bench/work/catalogs/out/$KIND
if [ "${_MTKIT_INSIDE:-}" != 1 ]; then
    [ "$(id -u)" = 0 ] || { echo "needs root (a private mount namespace: unshare -m)" >&2; exit 2; }
    TMP=$(mktemp -d /tmp/catalog_programs.XXXXXX)
    trap 'rm -rf "$TMP"' EXIT
    for lang in $LANGS; do
        case $lang in de) loc=de_DE;; ru) loc=ru_RU;; pl) loc=pl_PL;; cs) loc=cs_CZ;; *) loc=$lang;; esac
        mkdir -p "$TMP/locales" "$TMP/mo/$lang"
        localedef -i "$loc" -f UTF-8 "$TMP/locales/$loc.UTF-8" 2>/dev/null || true
        [ -d "$TMP/locales/$loc.UTF-8" ] || { echo "localedef $loc failed (apt-get install locales)" >&2; exit 2; }
        # the language's catalogs as installed, then ours over them
        if [ -d "/usr/share/locale/$lang/LC_MESSAGES" ]; then cp -a "/usr/share/locale/$lang/LC_MESSAGES/." "$TMP/mo/$lang/"; fi
        for domain in util-linux findutils; do
            po=$OUT/$domain/$lang.$lang.$KIND.po
            [ -f "$po" ] || { echo "$po missing: run python bench/studies/catalogs.py check first" >&2; exit 2; }
            # no --check: a hostile catalog that msgfmt --check refuses is compiled all the same, to see
            # what its broken directives do to the program
            msgfmt -o "$TMP/mo/$lang/$domain.mo" "$po"
        done
        echo "$lang $loc" >> "$TMP/langs"
    done
    export _MTKIT_INSIDE=1 TMP KIND
    exec unshare -m --propagation private bash "$0" "$KIND" $LANGS
fi

# ---- inside the private mount namespace
RESULTS=$ROOT/bench/results/catalog_programs.$KIND.tsv
mkdir -p "$ROOT/bench/results"
printf 'program\tform\tlang\tstatus\ttranslated\n' > "$RESULTS"
MISSING=/nonexistent-mtkit/x   # a path whose directory is missing: nothing can be created there
PACKAGES="util-linux mount bsdutils bsdextrautils util-linux-extra findutils"
# never run but for --help/--version/a bad option (interactive, or they would act)
NOARGS_ONLY=" agetty getty sulogin su runuser login newgrp script ctrlaltdel switch_root pivot_root
  rtcwake blkdiscard mkswap mkfs mkfs.bfs mkfs.cramfs mkfs.minix fstrim fsfreeze wall write mesg setterm
  chcpu chmem ldattach readprofile addpart delpart resizepart blkzone unshare nsenter setsid setarch i386
  linux32 linux64 x86_64 setpriv taskset chrt ionice uclampset choom renice prlimit ipcmk ipcrm kill
  swapon hwclock eject zramctl "
# a missing file as the argument (each reads or lists a file and changes nothing)
declare -A MISSING_FORM=(
  [more]="$MISSING" [column]="$MISSING" [hexdump]="$MISSING" [hd]="$MISSING" [ul]="$MISSING"
  [rev]="$MISSING" [colcrt]="$MISSING" [look]="word $MISSING" [fincore]="$MISSING" [blkid]="$MISSING"
  [fsck.minix]="-n $MISSING" [fsck.cramfs]="$MISSING" [isosize]="$MISSING" [wipefs]="$MISSING"
  [blockdev]="--getsz $MISSING" [swaplabel]="$MISSING" [lsblk]="$MISSING" [findmnt]="$MISSING"
  [mountpoint]="$MISSING" [namei]="$MISSING" [hardlink]="-n $MISSING" [last]="-f $MISSING"
  [lastb]="-f $MISSING" [utmpdump]="$MISSING" [fallocate]="-l 1 $MISSING" [flock]="$MISSING true"
  [logger]="-f $MISSING" [scriptreplay]="$MISSING" [scriptlive]="$MISSING" [partx]="--show $MISSING"
  [mcookie]="-f $MISSING" [losetup]="$MISSING" [swapoff]="$MISSING" [mount]="$MISSING"
  [umount]="$MISSING" [find]="$MISSING" [xargs]="-a $MISSING" [fsck]="-N $MISSING" [dmesg]="-F $MISSING"
  [getopt]="-o" [rename.ul]="a b $MISSING" [whereis]="-B $MISSING -f find" [lsns]="--task 999999999"
)
# read-only listings, run bare (their column headers and printf formats come from the catalog)
LISTINGS=" lscpu lsipc ipcs lsmem lslocks lsns lsblk findmnt lsirq lslogins lsfd mcookie last wdctl
  whereis dmesg col colrm "
programs=$(for p in $PACKAGES; do dpkg -L "$p" 2>/dev/null | grep -E '/s?bin/[^/]+$' || true; done | sort -u)
crashes=0; hangs=0; runs=0; translated=0
while read -r lang loc; do
    mount --bind "$TMP/mo/$lang" "/usr/share/locale/$lang/LC_MESSAGES" 2>/dev/null || {
        mkdir -p "/usr/share/locale/$lang/LC_MESSAGES" && mount --bind "$TMP/mo/$lang" "/usr/share/locale/$lang/LC_MESSAGES"; }
    for path in $programs; do
        [ -x "$path" ] || continue
        name=$(basename "$path")
        forms=("--help" "--version" "--mtkit-no-such-option")
        if [[ "$NOARGS_ONLY" != *" $name "* ]]; then
            [ -n "${MISSING_FORM[$name]:-}" ] && forms+=("${MISSING_FORM[$name]}")
            [[ "$LISTINGS" == *" $name "* ]] && forms+=("")
        fi
        for form in "${forms[@]}"; do
            set +e
            # shellcheck disable=SC2086
            output=$(cd /tmp && LOCPATH=$TMP/locales LANG=$loc.UTF-8 LC_ALL=$loc.UTF-8 LANGUAGE=$lang \
                     timeout -k 2 10 "$path" $form </dev/null 2>&1)
            status=$?
            set -e
            runs=$((runs + 1))
            # translated: the output holds a letter the fake model writes (umlauts, Cyrillic)
            if printf '%s' "$output" | grep -q '[äöüÄÖÜаекморсхуАВЕКМНОРСТХ]'; then is_tr=yes; translated=$((translated + 1)); else is_tr=no; fi
            if [ $status -eq 124 ] || [ $status -eq 137 ]; then hangs=$((hangs + 1)); state=hang
            elif [ $status -ge 128 ]; then crashes=$((crashes + 1)); state="CRASH($status)"
                echo "CRASH $lang $name $form: status $status: $(printf '%s' "$output" | tail -2 | tr '\n' ' ')"
            else state=$status; fi
            printf '%s\t%s\t%s\t%s\t%s\n' "$name" "${form:-(none)}" "$lang" "$state" "$is_tr" >> "$RESULTS"
        done
    done
    echo "$lang: xargs --help under the catalog: $(LOCPATH=$TMP/locales LC_ALL=$loc.UTF-8 LANGUAGE=$lang xargs --help 2>&1 | sed -n 2p)"
    umount "/usr/share/locale/$lang/LC_MESSAGES"
done < "$TMP/langs"
echo "$KIND catalogs: $runs runs of $(echo "$programs" | wc -l) programs in $LANGS, $translated with translated output, crashes: $crashes, hangs: $hangs ($RESULTS)"
[ "$crashes" -eq 0 ]
